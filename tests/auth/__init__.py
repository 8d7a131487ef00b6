"""Tests of mcpcall.auth: discovery, the OAuth flow, grants, tokens, JOSE, redirects, hardening."""
