"""Auth objects for the conformance suite's extension scenarios (grants without a browser).

``client.py`` asks :func:`auth_for` first for every ``auth/…`` scenario; ``None`` means
"not an extension scenario: use the authorization code flow". The context keys are the
ones each scenario's ``start()`` returns (``MCP_CONFORMANCE_CONTEXT``).
"""

from __future__ import annotations

from typing import Any

from mcpcall.auth.grants import ClientCredentials, EnterpriseAuth, JWTBearer
from mcpcall.auth.jose import SigningKey

TIMEOUT = 30.0


def _client_credentials_jwt(context: dict[str, Any]) -> ClientCredentials:
    key = SigningKey.from_pem(context["private_key_pem"], alg=context.get("signing_algorithm") or None)
    return ClientCredentials(context["client_id"], signing_key=key, timeout=TIMEOUT)


def _client_credentials_basic(context: dict[str, Any]) -> ClientCredentials:
    return ClientCredentials(context["client_id"], context["client_secret"], timeout=TIMEOUT)


def _wif(context: dict[str, Any]) -> JWTBearer:
    return JWTBearer(context["valid_jwt"], client_id=context.get("client_id"), timeout=TIMEOUT)


def _enterprise(context: dict[str, Any]) -> EnterpriseAuth:
    return EnterpriseAuth(
        context["idp_id_token"],
        client_id=context["client_id"],
        client_secret=context.get("client_secret"),
        idp_token_endpoint=context.get("idp_token_endpoint"),
        idp_issuer=context.get("idp_issuer"),
        idp_client_id=context.get("idp_client_id"),
        timeout=TIMEOUT,
    )


_BUILDERS = {
    "auth/client-credentials-jwt": _client_credentials_jwt,
    "auth/client-credentials-basic": _client_credentials_basic,
    "auth/wif-jwt-bearer": _wif,
    "auth/enterprise-managed-authorization": _enterprise,
}


def auth_for(scenario: str, context: dict[str, Any], url: str) -> Any:
    """The ``requests`` auth object for an extension scenario, or ``None`` for any other scenario."""
    build = _BUILDERS.get(scenario)
    return build(context) if build is not None else None
