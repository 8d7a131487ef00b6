"""``OAuth``: a ``requests`` auth object that runs the MCP authorization flow (OAuth 2.1) when a server says 401.

    auth = OAuth(redirect_uri="http://127.0.0.1:8765/callback", redirect_handler=open_browser_and_wait)
    requests.post(url, json=message, auth=auth)        # or mcpcall.connect(url, auth=auth)

On each request the stored token for (issuer, canonical resource) is attached,
refreshed first when it expires within 30 s: once however many threads share the
object and, when the token store has a refresh lock
(:class:`~mcpcall.auth.tokens.FileTokenStore`,
:class:`~mcpcall.auth.redis_store.RedisTokenStore`), once however many processes
share the store (each reads the token again under the lock and uses another's
fresh one). A 401 runs, once per resource at a time however many threads share
the object: protected resource metadata → authorization server metadata → client
identity (pre-registered, else Dynamic Client Registration) → authorization code
with PKCE S256, ``state``, ``iss`` and ``resource`` (through ``redirect_handler``)
→ token. The original request is then
sent once more with the new token, the way requests' digest auth re-sends; a
second 401 is returned as it is.

A 403 with ``error="insufficient_scope"`` re-authorizes once for that request,
asking for the union of the scopes asked for so far and the challenged ones; when
the challenge adds nothing new the 403 is returned as it is (no authorization loop).

Client identity follows the spec's order: a pre-registered ``client_id``, else a
Client ID Metadata Document (``client_metadata_url``, an https URL used as the
client_id) when the authorization server supports them, else Dynamic Client
Registration. The browser step is ``redirect_handler``; without one,
:func:`mcpcall.auth.redirect.default_redirect` picks a loopback listener or a
paste-the-URL prompt, unless ``interactive=False``.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Callable, overload

import requests
from requests.cookies import extract_cookies_to_jar

from ..errors import AuthError, SignInRequired, TokenStoreUnavailable
from ..forking import on_fork_in_child
from ..urls import redact_url
from .challenge import Challenge, bearer_challenge
from .discovery import AuthorizationServer, ProtectedResource, canonical_resource
from .flow import (
    Client,
    NoResourceMetadata,
    RequestEnded,
    TokenEndpointError,
    authorization_url,
    discover,
    exchange_code,
    new_session,
    parse_redirect,
    probe,
    refresh_token,
)
from .hooks import REFUSED_COOLDOWN, IssuedHere, Refusals, connection_url, drain, emit, request_exchange
from .identity import Identities, check_client_metadata_url, check_redirect_uri
from .pkce import new_pkce, new_state
from .tokens import (
    MemoryTokenStore,
    RefreshAborted,
    RefreshGate,
    RefreshTimeout,
    Token,
    TokenStore,
    fresh_locks_in_child,
    put_unless_replaced,
    refresh_lock,
)

if TYPE_CHECKING:
    from .jose import DPoPProver

__all__ = ["OAuth", "RedirectHandler", "SignInRequired"]

log = logging.getLogger("mcpcall.auth.oauth")

#: ``redirect_handler(authorize_url) -> the URL the browser was redirected to`` (carrying code and state).
RedirectHandler = Callable[[str], str]

#: Refresh this many seconds before a token's expiry (at most a quarter of its lifetime).
REFRESH_MARGIN = 30.0
#: A store's refresh lock outlives its holder's token request by this much before others may take it
#: (a holder that died); see :meth:`OAuth._lease`.
LEASE_SLACK = 5.0
#: The longest a thread waits for another thread's interactive flow (a person may be typing a password):
#: a little longer than the loopback listener's own 300 s, so that waiting threads get its outcome.
FLOW_WAIT = 330.0
#: One person, one browser tab or prompt at a time, however many servers want a sign-in.
_ONE_PERSON = threading.Lock()


def _renew_one_person() -> None:
    global _ONE_PERSON  # a forked child needs its own: a thread of the parent may have held it
    _ONE_PERSON = threading.Lock()


on_fork_in_child(_renew_one_person, _renew_one_person)


@dataclass(frozen=True)
class _Context:
    """What the flow learnt about one resource: its authorization server and the scopes asked for.

    (The client a token is refreshed with is the one it was issued to: ``Token.client_id``.)
    """

    server: AuthorizationServer
    scopes: tuple[str, ...] = ()
    indicator: str | None = None  # the RFC 8707 resource, as the protected resource metadata spells it


#: DPoP proof algorithms in the order this client prefers them (all asymmetric; never ``none``).
DPOP_ALGS = ("ES256", "ES384", "ES512", "EdDSA", "PS256", "RS256")


def _sent_token(request: requests.PreparedRequest) -> str | None:
    value = request.headers.get("Authorization")
    if isinstance(value, str) and value.startswith(("Bearer ", "DPoP ")):
        return value.split(" ", 1)[1]
    return None


def _union(first: tuple[str, ...], second: tuple[str, ...]) -> tuple[str, ...]:
    """Both scope lists, in order, each scope once."""
    return tuple(dict.fromkeys((*first, *second)))


class OAuth(IssuedHere, requests.auth.AuthBase):
    """OAuth 2.1 for remote MCP servers, synchronous and thread-safe; one object may serve many threads.

    ``client_id``/``client_secret``: a pre-registered client. ``client_metadata_url``:
    an https URL serving this client's metadata document, used as the client_id where
    the authorization server supports that. Otherwise Dynamic Client Registration.
    ``redirect_handler(authorize_url) -> redirected_url`` drives the browser step;
    ``redirect_uri`` defaults to the handler's own ``redirect_uri`` attribute. With no
    handler, :func:`mcpcall.auth.redirect.default_redirect` is used when the flow first
    needs one (``interactive=False`` refuses instead, for workers that must never wait
    on a person). ``scopes`` are asked for when neither the 401 nor the resource
    metadata name any; ``offline_access`` is added when the authorization server lists
    it, so a refresh token can come back. ``token_store`` defaults to memory.
    ``timeout`` bounds each HTTP call the flow makes, from connecting to the last byte.
    ``dpop=True`` binds tokens to a key of this object's (RFC 9449, needs ``mcpcall[auth]``)
    where the authorization server advertises DPoP: every token request and every MCP
    request then carries a fresh proof, and server nonces are remembered and retried with.
    ``fallback_endpoints=True`` serves servers of the 2025-03-26 revision that publish no
    OAuth metadata at all: their origin's ``/authorize``, ``/token`` and ``/register`` are
    used (off by default: any 401 without metadata would otherwise start a browser flow).

    Pre-registered credentials belong to one authorization server: ``issuer=`` names it;
    without it they are bound to the first one a server names, and any other is refused
    (a server must not be able to collect another server's client secret).

    A person is asked (a browser tab, a prompt) only in :meth:`login`, on the calling
    thread: ``connect()`` calls it first when this object would need one. Inside a
    request (on mcpcall's HTTP threads) a flow that would need a person fails at once
    and says to call ``login()``; a ``redirect_handler`` of yours that needs nobody (it has
    no true ``needs_person`` attribute) runs wherever the flow runs.
    """

    def __init__(
        self,
        *,
        client_id: str | None = None,
        client_secret: str | None = None,
        client_name: str = "mcpcall",
        client_metadata_url: str | None = None,
        redirect_uri: str | None = None,
        scopes: list[str] | tuple[str, ...] | None = None,
        redirect_handler: RedirectHandler | None = None,
        interactive: bool = True,
        offline_access: bool = True,
        token_store: TokenStore | None = None,
        session: requests.Session | None = None,
        timeout: float = 30.0,
        dpop: bool = False,
        fallback_endpoints: bool = False,
        issuer: str | None = None,
    ) -> None:
        if client_secret is not None and not client_id:
            raise ValueError("client_secret needs a client_id")
        if issuer is not None and (not isinstance(issuer, str) or not issuer):
            raise ValueError("issuer must be the authorization server's issuer URL")
        if redirect_uri is not None:
            check_redirect_uri(redirect_uri)
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not (math.isfinite(timeout) and timeout > 0):
            raise ValueError("timeout must be a positive number of seconds")
        if redirect_handler is not None and not callable(redirect_handler):
            raise TypeError("redirect_handler must be a callable taking the authorization URL")
        self.client_id = client_id
        self._client_secret = client_secret
        self.client_name = client_name
        self.client_metadata_url = check_client_metadata_url(client_metadata_url)
        self.redirect_uri = redirect_uri
        self.scopes = tuple(scopes) if scopes else ()
        self._redirect_handler = redirect_handler
        self.interactive = bool(interactive)
        self.offline_access = bool(offline_access)
        self._store: TokenStore = token_store if token_store is not None else MemoryTokenStore()
        self._owns_session = session is None
        self._session = session if session is not None else new_session()
        self.timeout = float(timeout)
        self._lock = threading.Lock()
        self._contexts: dict[str, _Context] = {}  # canonical resource -> what the flow found
        # (issuer, resource) -> a refreshed token the store did not take (it did not answer), and the access token it replaces
        self._unsaved: dict[tuple[str, str], tuple[Token, str | None]] = {}
        self._gate = RefreshGate()
        fresh_locks_in_child(self)
        self.dpop = bool(dpop)
        self.fallback_endpoints = bool(fallback_endpoints)
        self.issuer = issuer
        self._identities = Identities(
            client_id=client_id,
            client_secret=client_secret,
            client_name=client_name,
            client_metadata_url=self.client_metadata_url,
            issuer=issuer,
            store=self._store,
            session=self._session,
            timeout=self.timeout,
        )
        self._prover: DPoPProver | None = None
        self._issued: dict[str, None] = {}  # access tokens this object got from a token endpoint (recent ones)
        self._logins = 0  # login() calls in progress
        self._asking: set[str] = set()  # resources whose sign-in is waiting on a person right now
        self._no_oauth: dict[str, float] = {}  # resource -> when its 401 was found to have no OAuth behind it
        self._refusals = Refusals()  # fresh tokens a resource refused a moment ago
        self._signing_in = threading.local()
        self._inherited: list[requests.Session] = []  # a forked child's copies of its parents' sessions, never used

    def _after_fork(self) -> None:
        """In a forked child (locks are renewed by the hook): no sign-in is in progress here, and a session of its own."""
        self._signing_in = threading.local()
        self._logins = 0
        self._asking = set()
        self._refusals = Refusals()
        if self._owns_session:
            # The parent's pooled connections must not be reused here (their sockets are the parent's), nor
            # closed (that takes their pools' locks, which a parent's thread may have held): kept, never used.
            self._inherited.append(self._session)
            self._session = self._identities._session = new_session()

    def __repr__(self) -> str:
        secret = ", client_secret=***" if self._client_secret else ""
        with self._lock:
            known = len(self._contexts)
        return f"<OAuth client_id={self.client_id!r}{secret} resources={known} timeout={self.timeout:g}>"

    def close(self) -> None:
        """Close what this object made (its HTTP session, a default redirect listener); idempotent. Tokens stay stored."""
        if self._owns_session:
            self._session.close()
        handler = self._redirect_handler
        close = getattr(handler, "close", None)
        if callable(close):
            close()

    def __enter__(self) -> OAuth:  # noqa: PYI034 - no typing_extensions for Self on 3.9/3.10
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- public helpers --------------------------------------------------------------------------

    def login(self, server_url: str, *, force: bool = False) -> Token | None:
        """Sign in for ``server_url`` now, on this thread, asking a person if need be; the token, or ``None``.

        Sends a ``ping`` (with the token this object has, if any) to learn whether the
        server takes it and, if not, its challenge (scope, metadata URL); then runs the flow
        a 401 would, refreshing a stored token when it can. ``None``: the server asks for no
        sign-in. ``force``: a new authorization even if a token is stored. ``connect()`` calls
        this by itself when signing in needs a person.
        """
        resource = canonical_resource(server_url)
        with self._lock:
            self._logins += 1
        self._signing_in.active = True
        try:
            return self._login(resource, server_url, force)
        finally:
            self._signing_in.active = False
            with self._lock:
                self._logins -= 1
                last = self._logins == 0
            handler = self._redirect_handler
            close = getattr(handler, "close", None)
            if last and getattr(handler, "needs_person", False) and callable(close):
                close()  # a listener bound for a flow that failed is not left open (it binds again when needed)

    def _login(self, resource: str, server_url: str, force: bool) -> Token | None:
        token = None if force else self._usable_token(resource)
        status, challenge = probe(self._session, server_url, timeout=self.timeout, headers=self._headers(server_url, token))
        if status not in (401, 403) and challenge is None:
            return token  # it took the token we have, or asks for none
        sent = token.access_token if token is not None else None
        self._refusals.forget(resource)
        for attempt in (1, 2, 3):
            try:
                token = self._run_flow(resource, server_url, challenge, sent, anew=force)
            except SignInRequired:
                if attempt == 3:
                    raise
                continue  # another thread led the flow and could not ask a person: this one can
            except NoResourceMetadata:
                if challenge is not None and challenge.resource_metadata:
                    raise
                return None  # a 401 with no OAuth behind it: connecting will report it
            if force or self._issued_here(token):
                return token
            # A token kept from an earlier run: see that the server still takes it.
            status, again = probe(self._session, server_url, timeout=self.timeout, headers=self._headers(server_url, token))
            if status not in (401, 403):
                return token
            sent, challenge = token.access_token, again or challenge
        return token

    def _headers(self, url: str, token: Token | None) -> dict[str, str]:
        """The headers that present ``token`` on a POST to ``url`` (none without a token)."""
        if token is None:
            return {}
        prepared = requests.Request("POST", url).prepare()
        self._present(prepared, token)
        return {name: value for name, value in prepared.headers.items() if name in ("Authorization", "DPoP")}

    @property
    def sign_in_first(self) -> bool:
        """Whether signing in here may need a person (the default handler, or one marked ``needs_person``)."""
        handler = self._redirect_handler
        return self.interactive and (handler is None or bool(getattr(handler, "needs_person", False)))

    def token_for(self, server_url: str) -> Token | None:
        """The stored token for ``server_url`` (refreshed first if it is about to expire), or ``None``."""
        return self._usable_token(canonical_resource(server_url))

    # -- requests hooks --------------------------------------------------------------------------

    def __call__(self, r: requests.PreparedRequest) -> requests.PreparedRequest:
        """Attach the stored token (refreshed first if it is about to expire) and watch for a 401 or 403."""
        resource = canonical_resource(connection_url(r))
        token = self._usable_token(resource)
        if token is not None:
            self._present(r, token)
        body_tell = getattr(r.body, "tell", None)
        setattr(r, "_mcpcall_body_pos", body_tell() if callable(body_tell) else None)  # noqa: B010 - per request
        r.register_hook("response", self._on_response)  # type: ignore[no-untyped-call]
        return r

    def _present(self, request: requests.PreparedRequest, token: Token) -> None:
        """Put ``token`` on ``request``: ``Bearer``, or ``DPoP`` with a fresh proof for a DPoP-bound token."""
        prover = self._prover
        if token.token_type == "DPoP" and prover is not None:
            request.headers["Authorization"] = f"DPoP {token.access_token}"
            request.headers["DPoP"] = prover.proof(str(request.method), str(request.url), token.access_token)
        else:
            request.headers["Authorization"] = f"Bearer {token.access_token}"

    def _on_response(self, r: requests.Response, **kwargs: Any) -> requests.Response:
        """On a 401: authorize; on a 403 insufficient_scope: step up. Then re-send the request once with the token."""
        prover = self._prover
        if prover is not None and prover.update_from_response(r) and "DPoP" in r.request.headers:
            return self._resend(r, None, kwargs)  # a resource server nonce (RFC 9449 section 9): same token, new proof
        if r.status_code not in (401, 403) or getattr(r.request, "_mcpcall_resent", False):
            return r
        request = r.request
        server_url = connection_url(request)
        resource = canonical_resource(server_url)
        sent = _sent_token(request)
        if r.status_code == 401 and sent is not None and self._refusals.refused(resource, sent):
            emit(log, logging.INFO, "%s refused a token just issued for it; not authorizing again yet", redact_url(resource))
            return r
        header = r.headers.get("WWW-Authenticate", "")
        challenge = bearer_challenge(header) or bearer_challenge(header, scheme="DPoP")
        scopes: tuple[str, ...] | None = None
        if r.status_code == 403:
            if challenge is None or challenge.error != "insufficient_scope" or sent is None:
                return r
            context = self._context(resource)
            asked = context.scopes if context is not None else ()
            scopes = _union(asked, challenge.scope)
            if set(scopes) <= set(asked):
                emit(log, logging.INFO, "%s still says insufficient_scope for scopes already granted; not asking again", redact_url(resource))
                return r
        drain(r)  # read and release the 401 first, so a failed flow leaves no connection behind
        hint = challenge is not None and challenge.resource_metadata
        with self._lock:
            found = self._no_oauth.get(resource)
        if not hint and found is not None and time.monotonic() - found < REFUSED_COOLDOWN:
            return r  # looked for OAuth metadata a moment ago and found none: not again on every request
        try:
            token = self._run_flow(resource, server_url, challenge, sent, scopes)
        except NoResourceMetadata as exc:
            if hint:
                raise
            # A 401 with no OAuth behind it (an API-key server, a proxy): the caller sees it as it is.
            emit(log, logging.INFO, "%s; passing the HTTP %d on", str(exc), r.status_code)
            with self._lock:
                self._no_oauth[resource] = time.monotonic()
            return r
        response = self._resend(r, token, kwargs)
        if response.status_code == 401 and not self._issued_here(token):
            # A token kept from earlier that the server no longer takes: refresh it, or authorize again, once.
            header = response.headers.get("WWW-Authenticate", "")
            again = bearer_challenge(header) or bearer_challenge(header, scheme="DPoP") or challenge
            drain(response)
            token = self._run_flow(resource, server_url, again, token.access_token, scopes)
            response = self._resend(response, token, kwargs)
        if response.status_code == 401 and self._issued_here(token):
            self._refusals.refuse(resource, token.access_token)
        return response

    def _resend(self, r: requests.Response, token: Token | None, kwargs: dict[str, Any]) -> requests.Response:
        """``r``'s request once more, with ``token`` (``None``: the same token, a fresh DPoP proof).

        A 401/403 to this one is returned as it is, except that a DPoP nonce challenge
        is answered once more with the nonce it carries.
        """
        request = r.request
        if token is None:
            token = self._usable_token(canonical_resource(connection_url(request)))
            if token is None:
                return r
        response = r
        for _ in (1, 2):
            again = request.copy()
            body_seek = getattr(again.body, "seek", None)
            position = getattr(request, "_mcpcall_body_pos", None)
            if callable(body_seek) and isinstance(position, int):
                body_seek(position)  # a file body was read by the first send
            jar = getattr(again, "_cookies", None)  # what requests' digest auth does: keep cookies the 401 set
            if jar is not None:
                extract_cookies_to_jar(jar, request, response.raw)  # type: ignore[no-untyped-call]
                again.prepare_cookies(jar)
            self._present(again, token)
            setattr(again, "_mcpcall_resent", True)  # noqa: B010 - per request
            previous = response
            drain(previous)  # release the connection before sending again
            response = r.connection.send(again, **kwargs)
            response.history.extend([*previous.history, previous])
            response.request = again
            prover = self._prover
            if prover is None or not prover.update_from_response(response) or "DPoP" not in again.headers:
                break
        return response

    def _run_flow(
        self,
        resource: str,
        server_url: str,
        challenge: Challenge | None,
        sent: str | None,
        scopes: tuple[str, ...] | None = None,
        *,
        anew: bool = False,
    ) -> Token:
        """The flow for ``resource`` in one thread at a time (others wait for its token); ``anew``: ignore stored tokens.

        A request does not wait for a person: while one is being asked for ``resource``, other
        threads' flows fail at once with :class:`SignInRequired`.
        """
        if not getattr(self._signing_in, "active", False):
            with self._lock:
                asking = resource in self._asking
            if asking:
                raise SignInRequired(
                    f"a sign-in for {redact_url(resource)} is waiting for a person in another thread; try again after it"
                )
        try:
            return self._gate.run(
                ("flow", resource),
                lambda: self._authorize(resource, server_url, challenge, sent, scopes, anew=anew),
                timeout=FLOW_WAIT,
                stop=request_exchange(),
            )
        except RefreshAborted:
            raise RequestEnded(
                f"authorization for {redact_url(resource)}: the request ended while another thread was authorizing"
            ) from None
        except RefreshTimeout:
            raise AuthError(f"authorization for {redact_url(resource)} by another thread took over {FLOW_WAIT:g} s") from None

    # -- tokens ----------------------------------------------------------------------------------

    def _context(self, resource: str) -> _Context | None:
        with self._lock:
            return self._contexts.get(resource)

    def _usable_token(self, resource: str) -> Token | None:
        """The stored token for ``resource``, refreshed first when it expires soon and can be refreshed."""
        context = self._context(resource)
        if context is None:
            return None
        token = self._stored(context.server.issuer, resource)
        if token is not None and token.refresh_token and token.expires_within(token.refresh_margin(REFRESH_MARGIN)):
            token = self._refresh_shared(context, token)
        return token

    def _stored(self, issuer: str, resource: str) -> Token | None:
        """The stored token, once a refreshed one the store did not take is stored; that one while the store still fails."""
        key = (issuer, resource)
        with self._lock:
            unsaved = self._unsaved.get(key)
        if unsaved is not None:
            try:
                put_unless_replaced(self._store, *unsaved)  # not stored when another was meanwhile: that one is used
            except TokenStoreUnavailable:
                return unsaved[0]
            with self._lock:
                if self._unsaved.get(key) is unsaved:
                    del self._unsaved[key]
        return self._mine(self._store.get(issuer, resource))

    def _put_refreshed(self, token: Token, expected: str | None) -> bool:
        """Store a refreshed ``token`` over the one whose access token is ``expected``; ``False``: replaced meanwhile.

        The refresh spent the stored refresh token where the server rotates them, so the new one
        may be the only one that works. When the store does not answer, this object keeps it (and
        uses it) until a later request stores it.
        """
        try:
            return put_unless_replaced(self._store, token, expected)
        except TokenStoreUnavailable as exc:
            with self._lock:
                self._unsaved[(token.issuer, token.resource)] = (token, expected)
            emit(log, logging.WARNING, "%s; this process keeps the refreshed token for %s and stores it when the store answers",
                 str(exc), redact_url(token.resource))
            return True

    def _mine(self, token: Token | None) -> Token | None:
        """``token`` unless it is DPoP-bound to a key this object does not hold (another process's): never sent as Bearer.

        A DPoP token this object got from a token endpoint is bound to its own key.
        """
        if token is not None and token.token_type == "DPoP" and not self._issued_here(token):
            return None
        return token


    def _lease(self) -> float:
        """How long a store's refresh lock taken here lasts: a token request (twice, for a DPoP nonce) and some slack."""
        return 2 * self.timeout + LEASE_SLACK

    def _lock_wait(self) -> float:
        """The longest wait for another process's refresh: past a lease, so that a dead holder's lock has ended."""
        return self._lease() + 1.0

    @contextmanager
    def _store_lock(self, issuer: str, resource: str) -> Iterator[None]:
        """The store's refresh lock for the key (when it has one), the wait ended by this request's end too."""
        exchange = request_exchange()
        stop = exchange.aborted if exchange is not None else None
        with refresh_lock(self._store, issuer, resource, timeout=self._lock_wait(), lease=self._lease(), stop=stop):
            yield

    def _refresh_shared(self, context: _Context, old: Token) -> Token | None:
        """Refresh ``old`` once however many threads ask, and once however many processes share the store.

        Threads of this object share one run (the gate); processes sharing the store take its
        refresh lock in turn, and each reads the token again under it: the first refreshes, the
        others find its token. On failure the stored token is used (until a 401).
        """
        issuer, resource = context.server.issuer, old.resource

        def refresh() -> Token | None:
            current = self._mine(self._store.get(issuer, resource))
            if current is None or current.access_token != old.access_token:
                return current  # another thread (or process) already replaced it
            try:
                with self._store_lock(issuer, resource):
                    return self._refresh_held(context, old)
            except RefreshAborted:
                raise RequestEnded(
                    f"token refresh for {redact_url(resource)}: the request ended while another process was refreshing it"
                ) from None
            except RefreshTimeout as exc:
                emit(log, logging.WARNING, "%s; using the stored token", str(exc))
                return self._mine(self._store.get(issuer, resource))

        wait = self._lock_wait() + 2 * self.timeout + 1  # the lock, then the token request
        try:
            return self._gate.run(("refresh", issuer, resource), refresh, timeout=wait, stop=request_exchange())
        except (RefreshTimeout, RequestEnded):  # the request this was for ended, or another thread's refresh hangs
            return old

    def _refresh_held(self, context: _Context, old: Token) -> Token | None:
        """With the store's refresh lock held: refresh ``old`` unless the stored token is another one by now."""
        issuer, resource = context.server.issuer, old.resource
        current = self._mine(self._store.get(issuer, resource))
        if current is None or current.access_token != old.access_token:
            return current  # another process refreshed it while this one waited for the lock
        client = self._client(context.server, browser=False, token=current)
        if client is None or not current.refresh_token:
            return current  # issued to a client this object does not know: not ours to refresh
        try:
            new = refresh_token(
                self._session,
                context.server,
                client,
                current,
                timeout=self.timeout,
                resource=context.indicator,
                dpop=self._prover_for(context.server),
            )
        except RequestEnded:
            raise  # not the refresh token's fault: the next request refreshes (waiters try themselves)
        except TokenEndpointError as exc:
            emit(log, logging.WARNING, "%s; the next 401 starts a new authorization", str(exc))  # the text: a record must not keep the traceback (and its sockets) alive
            if exc.status in (400, 401):  # invalid_grant and friends: this refresh token is done
                spent = replace(current, refresh_token=None)
                if not put_unless_replaced(self._store, spent, current.access_token):
                    return self._mine(self._store.get(issuer, resource))  # replaced meanwhile: use that
            return current
        except AuthError as exc:
            emit(log, logging.WARNING, "%s", str(exc))
            return current
        new = self._note(new)
        if not self._put_refreshed(new, current.access_token):
            # A holder whose lease ran out stored a token after ours was asked for: keep theirs, use the latest.
            latest = self._mine(self._store.get(issuer, resource))
            return latest if latest is not None else new
        emit(log, logging.DEBUG, "refreshed the token for %s", redact_url(resource))
        return new

    def _refresh_refused(
        self, server: AuthorizationServer, stored: Token, sent: str | None, indicator: str
    ) -> Token | None:
        """After a 401: refresh ``stored`` (expired, or refused) under the store's refresh lock; ``None``: authorize anew.

        Under the lock the token is read again: one another process stored meanwhile is used
        as it is, and only a token still unusable is refreshed.
        """
        issuer, resource = server.issuer, stored.resource
        try:
            with self._store_lock(issuer, resource):
                current = self._mine(self._store.get(issuer, resource))
                if current is None:
                    return None
                if current.access_token not in (stored.access_token, sent) and not current.expires_within(0):
                    return current  # another process got one while this one waited
                client = self._client(server, browser=False, token=current)
                if client is None or not current.refresh_token:
                    return None
                try:
                    token = refresh_token(
                        self._session, server, client, current, timeout=self.timeout, resource=indicator,
                        dpop=self._prover_for(server),
                    )
                except RequestEnded:
                    raise
                except AuthError as exc:
                    emit(log, logging.INFO, "%s; authorizing again", str(exc))
                    return None
                token = self._note(token)
                if self._put_refreshed(token, current.access_token):
                    return token
                latest = self._mine(self._store.get(issuer, resource))
                return latest if latest is not None and not latest.expires_within(0) else token
        except RefreshAborted:
            raise RequestEnded(
                f"token refresh for {redact_url(resource)}: the request ended while another process was refreshing it"
            ) from None
        except RefreshTimeout as exc:
            latest = self._mine(self._store.get(issuer, resource))
            if latest is not None and latest.access_token not in (stored.access_token, sent) and not latest.expires_within(0):
                return latest
            raise AuthError(f"token refresh for {redact_url(resource)}: {exc}") from None

    # -- the flow --------------------------------------------------------------------------------

    def _authorize(
        self,
        resource: str,
        server_url: str,
        challenge: Challenge | None,
        sent: str | None,
        step_up: tuple[str, ...] | None,
        *,
        anew: bool = False,
    ) -> Token:
        """Everything after a 401 (or a 403 asking for more scope), for one resource: a token to retry with."""
        context = self._context(resource)
        if context is not None and not anew:
            stored = self._mine(self._store.get(context.server.issuer, resource))
            fresh = stored is not None and stored.access_token != sent and not stored.expires_within(0)
            if fresh and stored is not None and (step_up is None or set(step_up) <= set(context.scopes)):
                return stored  # another thread got one while this request was on its way
        metadata, server = discover(
            self._session,
            server_url,
            challenge.resource_metadata if challenge is not None else None,
            timeout=self.timeout,
            fallback_endpoints=self.fallback_endpoints,
        )
        stored = None if anew else self._mine(self._store.get(server.issuer, resource))
        if step_up is None and stored is not None and stored.access_token != sent and not stored.expires_within(0):
            with self._lock:
                self._contexts[resource] = _Context(server, stored.scope, metadata.resource)
            return stored  # a token kept from an earlier run
        scope = step_up if step_up is not None else self._scope(challenge, metadata, server)
        refresher = self._client(server, browser=False, token=stored) if stored is not None else None
        if step_up is None and stored is not None and stored.refresh_token and refresher is not None:
            refreshed = self._refresh_refused(server, stored, sent, metadata.resource)
            if refreshed is not None:
                with self._lock:
                    self._contexts[resource] = _Context(server, stored.scope or scope, metadata.resource)
                return refreshed
        client = self._client(server, scope=scope)
        token = self._note(self._authorization_code(server, client, resource, metadata.resource, scope))
        self._store.put(token)
        with self._lock:  # only now: a step-up that failed may be asked for again
            self._contexts[resource] = _Context(server, scope, metadata.resource)
        emit(log, logging.INFO, "authorized at %s for %s", redact_url(server.issuer), redact_url(resource))
        return token

    def _scope(self, challenge: Challenge | None, metadata: ProtectedResource, server: AuthorizationServer) -> tuple[str, ...]:
        """The scopes to ask for: the challenge's, else the resource's ``scopes_supported``, else ours; plus offline_access."""
        scope = tuple((challenge.scope if challenge is not None else ()) or metadata.scopes_supported or self.scopes or ())
        if scope and self.offline_access and "offline_access" in (server.scopes_supported or ()):
            scope = _union(scope, ("offline_access",))
        return scope

    @overload
    def _client(self, server: AuthorizationServer, *, scope: tuple[str, ...] = ()) -> Client: ...

    @overload
    def _client(
        self, server: AuthorizationServer, *, browser: bool, scope: tuple[str, ...] = (), token: Token | None = None
    ) -> Client | None: ...

    def _client(
        self, server: AuthorizationServer, *, browser: bool = True, scope: tuple[str, ...] = (), token: Token | None = None
    ) -> Client | None:
        """Our client at ``server`` (see :meth:`Identities.client`); ``browser=False``: only one already known."""
        redirect_uri = (lambda: self._browser(server)[1]) if browser else None
        return self._identities.client(server, redirect_uri=redirect_uri, scope=scope, token=token)

    def _browser(self, server: AuthorizationServer) -> tuple[RedirectHandler, str]:
        """The redirect handler and redirect URI; the default handler is made on first need.

        A handler that needs a person is used only inside :meth:`login`, on its caller's thread.
        """
        with self._lock:
            handler = self._redirect_handler
        person = (handler is None and self.interactive) or bool(getattr(handler, "needs_person", False))
        if person and not getattr(self._signing_in, "active", False):
            raise SignInRequired(
                f"authorization at {redact_url(server.issuer)} needs you to sign in (again): call auth.login(url) "
                "(or run `mcpcall login URL`) from your own code; mcpcall never opens a browser or prompts from "
                "inside a request"
            )
        with self._lock:
            handler = self._redirect_handler
            if handler is None and self.interactive:
                from .redirect import default_redirect  # only flows that need a person load it

                handler = self._redirect_handler = default_redirect()
        if handler is None:
            raise AuthError(
                f"authorization at {redact_url(server.issuer)} needs a person at a browser, and this OAuth object is "
                "not interactive: log in once with `mcpcall login URL` (a token file) or "
                "OAuth(token_store=...).login(url) (any store, RedisTokenStore included) and share that store, "
                "or pass redirect_handler="
            )
        redirect_uri = self.redirect_uri or getattr(handler, "redirect_uri", None)
        if not isinstance(redirect_uri, str) or not redirect_uri:
            raise AuthError(
                f"authorization at {redact_url(server.issuer)}: pass redirect_uri= with redirect_handler= "
                "(or a handler that has a redirect_uri attribute)"
            )
        try:
            check_redirect_uri(redirect_uri)
        except ValueError as exc:
            raise AuthError(f"authorization at {redact_url(server.issuer)}: {exc}") from None
        return handler, redirect_uri

    def _authorization_code(
        self, server: AuthorizationServer, client: Client, resource: str, indicator: str, scope: tuple[str, ...]
    ) -> Token:
        """Browser step and code exchange; the token is filed under ``resource``, asked for as ``indicator``."""
        handler, redirect_uri = self._browser(server)
        pkce, state = new_pkce(), new_state()
        url = authorization_url(server, client, redirect_uri=redirect_uri, pkce=pkce, state=state, resource=indicator, scope=scope)
        try:
            if getattr(handler, "needs_person", False):
                with self._lock:
                    self._asking.add(resource)
                try:
                    with _ONE_PERSON:  # one tab or prompt at a time, whichever server asks
                        redirected = handler(url)
                finally:
                    with self._lock:
                        self._asking.discard(resource)
            else:
                redirected = handler(url)
        except AuthError:
            raise
        except Exception as exc:  # noqa: BLE001 - the user's handler; its message may hold the URL
            raise AuthError(
                f"authorization at {redact_url(server.issuer)}: the redirect handler failed ({type(exc).__name__})"
            ) from None
        iss_required = server.raw.get("authorization_response_iss_parameter_supported") is True
        code = parse_redirect(redirected, state=state, issuer=server.issuer, iss_required=iss_required)
        return exchange_code(
            self._session,
            server,
            client,
            code=code,
            verifier=pkce.verifier,
            redirect_uri=redirect_uri,
            resource=indicator,
            timeout=self.timeout,
            filed_under=resource,
            dpop=self._prover_for(server),
        )

    def _prover_for(self, server: AuthorizationServer) -> DPoPProver | None:
        """This object's DPoP prover when ``dpop=True`` and ``server`` advertises an algorithm it can sign with."""
        if not self.dpop:
            return None
        advertised = server.raw.get("dpop_signing_alg_values_supported")
        if not isinstance(advertised, list):
            return None
        usable = [alg for alg in DPOP_ALGS if alg in advertised]
        if not usable:
            return None
        with self._lock:
            if self._prover is None:
                from .jose import DPoPProver, SigningKey

                self._prover = DPoPProver(SigningKey.generate(usable[0]))
            return self._prover
