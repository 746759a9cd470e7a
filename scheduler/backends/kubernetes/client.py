"""The official ``kubernetes`` client, configured once, and how its errors are classified.

Decisions where the documents are silent:

- One kubeconfig for the whole backend: ``OSMO_KAI_KUBECONFIG`` (the same file the queue sync
  uses), else ``KUBECONFIG`` / ``~/.kube/config``, else the in-cluster service account.
- urllib3's own retries are off (``retries=False``): every failure surfaces at once and the
  backend retries with its own backoff, so one policy governs all calls. Every call carries a
  request timeout so a hung API server cannot stall the loop.
- Transient: no HTTP status (connection refused/reset, timeouts), 429, 5xx. Everything else is
  a definite answer from the API server and is handled where it happens (404, 409, 410, 422).
"""

from __future__ import annotations

import json
import os
import threading
import time
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any

import orjson
import pycurl
import urllib3
from django.conf import settings
from kubernetes import client, config

from scheduler.core.collector import collector_paused
from scheduler.core.kai_names import MANAGED_BY, MANAGED_BY_LABEL

from . import metrics

REQUEST_TIMEOUT = (5, 30)  # (connect, read) seconds for ordinary calls
# Keep-alive connections per API client: at least one per thread that shares it (the
# placement's binding threads), so no request waits for, or opens and drops, a connection.
POOL_SIZE = 32
PODGROUPS = ("scheduling.run.ai", "v2alpha2", "podgroups")
QUEUES = ("scheduling.run.ai", "v2", "queues")
MANAGED_SELECTOR = f"{MANAGED_BY_LABEL}={MANAGED_BY}"
# How long a client's credentials headers are reused. Asking the configuration for them runs
# the kubeconfig's refresh hook (the host set again, the environment searched for proxies):
# 40 µs a request, a tenth of a binding's CPU. A token refreshed by the hook (exec plugins,
# the service account's rotated file) is sent within this time.
AUTH_REUSE_SECONDS = 1.0


def api_client(*, kubeconfig: str | None = None, context: str | None = None) -> Any:
    """A ``kubernetes.client.ApiClient`` for the configured cluster: ``kubeconfig``, else the
    setting ``OSMO_KAI_KUBECONFIG``, else ``KUBECONFIG`` / ``~/.kube/config`` as kubectl finds
    them; inside a pod with none of these, the in-cluster service account. The queue sync and
    the backend both connect through here."""
    configuration = client.Configuration()
    path = kubeconfig or settings.OSMO_KAI_KUBECONFIG
    if path is None and os.environ.get("KUBERNETES_SERVICE_HOST"):
        config.load_incluster_config(client_configuration=configuration)
    else:
        config.load_kube_config(config_file=path, context=context,
                                client_configuration=configuration, persist_config=False)
    configuration.retries = False
    configuration.connection_pool_maxsize = max(POOL_SIZE, configuration.connection_pool_maxsize)
    return metrics.instrument(client.ApiClient(configuration))


@dataclass
class Kube:
    """The API groups the backend uses, over one ApiClient (one per thread)."""

    api_client: Any

    @property
    def core(self) -> Any:
        return client.CoreV1Api(self.api_client)

    @property
    def custom(self) -> Any:
        return client.CustomObjectsApi(self.api_client)

    def close(self) -> None:
        curl = getattr(self.api_client, "_osmo_curl", None)
        if curl is not None:
            curl.close()
        try:
            self.api_client.close()
        except Exception:  # noqa: BLE001 - closing a pool that is already gone
            pass


def call(kube: Kube, method: str, path: str, body: Any = None, *,
         content_type: str = "application/json",
         timeout: tuple[float, float] = REQUEST_TIMEOUT) -> dict:
    """One request on the client's own connection pool (TLS, client certificates, token
    refresh and all), without the generated API's per-call validation and serialization —
    for the hot paths (a pod's create, its binding), where that overhead was the larger part
    of the CPU a call costs. Errors raise ``ApiException`` with the status, as the client
    does; the JSON answer comes back as a dict."""
    data = call_raw(kube, method, path, None if body is None else orjson.dumps(body),
                    content_type=content_type, timeout=timeout)
    return orjson.loads(data) if data else {}


def call_raw(kube: Kube, method: str, path: str, body: str | bytes | None = None, *,
             content_type: str = "application/json", accept: str = "application/json",
             timeout: tuple[float, float] = REQUEST_TIMEOUT) -> bytes:
    """As :func:`call`, the answer's bytes as they come (``path`` may carry a query)."""
    api = kube.api_client
    response = _requester(api)(method, path, headers=_headers(api, accept, content_type),
                               body=body, timeout=timeout)
    _raise_for_status(response)
    return response.data


@dataclass(frozen=True)
class Answer:
    """A whole answer of the API server, as :func:`call_raw` reads it."""

    status: int
    reason: str
    data: bytes


def _requester(api: Any) -> Any:
    """``request(method, path, headers=, body=, timeout=)`` → :class:`Answer` for ``api``:
    on libcurl (:class:`CurlRequests`), counted as every request is; on urllib3 where the
    configuration asks what that does not do (a proxy, a TLS server name)."""
    request = getattr(api, "_osmo_request", None)
    if request is not None:
        return request
    configuration = api.configuration
    if isinstance(api.rest_client.pool_manager, urllib3.ProxyManager) or getattr(
            configuration, "tls_server_name", None):
        send = _sender(api)

        def request(method: str, path: str, *, headers: dict[str, str], body: Any,
                    timeout: tuple[float, float]) -> Answer:
            response = send(method, path, headers=headers, body=body, preload_content=True,
                            timeout=urllib3.Timeout(connect=timeout[0], read=timeout[1]))
            return Answer(response.status, response.reason or "", response.data)
    else:
        curl = CurlRequests(configuration)
        api._osmo_curl = curl
        request = metrics.counted(curl.request)
    api._osmo_request = request
    return request


class CurlRequests:
    """Requests to one API server on libcurl, one keep-alive handle per thread (a handle is
    not shared across threads; each is a connection of its own, as urllib3's pool gave
    each thread). A request costs about a quarter of the CPU of urllib3's and http.client's
    Python — a binding's and a create's largest part in this process. HTTP/1.1, never
    retried nor redirected, TLS as the client's configuration says (its CA, client
    certificate, verification). No answer at all raises ``ConnectionError`` (``TimeoutError``
    when a timeout passed): an ``OSError``, transient as urllib3's were."""

    def __init__(self, configuration: Any):
        self.host = configuration.host.rstrip("/")
        self.configuration = configuration
        self._local = threading.local()
        self._handles: list[Any] = []
        self._lock = threading.Lock()

    def _handle(self) -> Any:
        handle = getattr(self._local, "handle", None)
        if handle is not None:
            return handle
        configuration = self.configuration
        handle = pycurl.Curl()
        handle.setopt(pycurl.HTTP_VERSION, pycurl.CURL_HTTP_VERSION_1_1)
        handle.setopt(pycurl.NOSIGNAL, 1)  # timeouts without signals: any thread may call
        handle.setopt(pycurl.FOLLOWLOCATION, 0)
        if configuration.ssl_ca_cert:
            handle.setopt(pycurl.CAINFO, configuration.ssl_ca_cert)
        if configuration.cert_file:
            handle.setopt(pycurl.SSLCERT, configuration.cert_file)
        if configuration.key_file:
            handle.setopt(pycurl.SSLKEY, configuration.key_file)
        if not configuration.verify_ssl:
            handle.setopt(pycurl.SSL_VERIFYPEER, 0)
            handle.setopt(pycurl.SSL_VERIFYHOST, 0)
        elif configuration.assert_hostname is False:
            handle.setopt(pycurl.SSL_VERIFYHOST, 0)
        with self._lock:
            self._handles.append(handle)
        self._local.handle = handle
        return handle

    def request(self, method: str, path: str, *, headers: dict[str, str], body: Any,
                timeout: tuple[float, float]) -> Answer:
        handle = self._handle()
        handle.setopt(pycurl.URL, self.host + path)
        if body is None:
            handle.setopt(pycurl.HTTPGET, 1)  # clears a previous request's body
            handle.setopt(pycurl.CUSTOMREQUEST, None if method == "GET" else method)
        else:
            data = body.encode() if isinstance(body, str) else bytes(body)
            handle.setopt(pycurl.POSTFIELDSIZE, len(data))
            handle.setopt(pycurl.COPYPOSTFIELDS, data)
            handle.setopt(pycurl.CUSTOMREQUEST, method)
        # "Expect:" off: libcurl would wait for a 100 Continue before a body over 1 KiB.
        handle.setopt(pycurl.HTTPHEADER, [f"{k}: {v}" for k, v in headers.items()]
                      + ["Expect:"])
        handle.setopt(pycurl.CONNECTTIMEOUT_MS, int(timeout[0] * 1000))
        handle.setopt(pycurl.TIMEOUT_MS, int((timeout[0] + timeout[1]) * 1000))
        chunks: list[bytes] = []
        handle.setopt(pycurl.WRITEFUNCTION, chunks.append)
        try:
            handle.perform()
        except pycurl.error as error:
            code, message = error.args
            failure = TimeoutError if code == pycurl.E_OPERATION_TIMEDOUT else ConnectionError
            raise failure(f"{method} {path}: {message} (libcurl error {code})") from None
        status = handle.getinfo(pycurl.RESPONSE_CODE)
        return Answer(status, _reason(status), b"".join(chunks))

    def close(self) -> None:
        """Close every handle; a thread that calls again later opens a new one."""
        with self._lock:
            handles, self._handles = self._handles, []
            self._local = threading.local()
        for handle in handles:
            handle.close()


def _reason(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return ""


def _sender(api: Any) -> Any:
    """``send(method, path, **urlopen_arguments)`` of ``api`` (an ``ApiClient``), made once:
    straight to its pool manager's connection pool of the API server (the manager's own
    ``request`` parses the URL and looks the pool up again at every call: about 45 µs, a
    seventh of a create's CPU), counted as the manager's requests are; through the manager
    when a proxy is configured. Never retried nor redirected (see the module's docstring)."""
    send = getattr(api, "_osmo_send", None)
    if send is not None:
        return send
    manager, host = api.rest_client.pool_manager, api.configuration.host
    if isinstance(manager, urllib3.ProxyManager):
        def send(method: str, path: str, **arguments: Any) -> Any:
            return manager.request(method, host + path, retries=False, redirect=False,
                                   **arguments)
    else:
        prefix = (urllib3.util.parse_url(host).path or "").rstrip("/")
        urlopen = metrics.counted(manager.connection_from_url(host).urlopen)

        def send(method: str, path: str, **arguments: Any) -> Any:
            return urlopen(method, prefix + path, retries=False, redirect=False,
                           assert_same_host=False, **arguments)
    api._osmo_send = send
    return send


# The generated list methods' keyword arguments → the API's query parameters.
QUERY_NAMES = {"resource_version": "resourceVersion", "timeout_seconds": "timeoutSeconds",
               "allow_watch_bookmarks": "allowWatchBookmarks",
               "label_selector": "labelSelector", "field_selector": "fieldSelector"}


def lister(kube: Kube, path: str) -> Any:
    """A LIST (and, with ``watch=True``, a WATCH) of the collection at ``path`` on the client's
    connection pool, as the informers call it — the keyword arguments of the generated list
    methods (``resource_version``, ``timeout_seconds``, ``label_selector``...) — answering the
    undecoded response. The generated ``CoreV1Api`` costs a second of import, and every call
    of it a validation, for the few calls an informer makes."""
    from urllib.parse import urlencode

    def list_(*, _request_timeout: tuple[float, float] = REQUEST_TIMEOUT,
              _preload_content: bool = False, **query: Any) -> Any:  # never preloaded
        params = {QUERY_NAMES.get(name, name): str(value).lower() if isinstance(value, bool)
                  else value for name, value in query.items() if value is not None}
        api = kube.api_client
        response = _sender(api)(
            "GET", f"{path}?{urlencode(params)}", headers=_headers(api), preload_content=False,
            timeout=urllib3.Timeout(connect=_request_timeout[0], read=_request_timeout[1]))
        try:
            _raise_for_status(response)
        except Exception:
            response.release_conn()
            raise
        return response

    return list_


def _raise_for_status(response: Any) -> None:
    """An error answer as the official client raises it: ``ApiException`` with its body."""
    if response.status < 400:
        return
    from kubernetes.client.exceptions import ApiException

    exc = ApiException(status=response.status, reason=response.reason)
    exc.body = response.data.decode("utf-8", "replace") if response.data else ""
    raise exc


def _headers(api: Any, accept: str = "application/json", content_type: str | None = None
             ) -> dict[str, str]:
    headers = {"Accept": accept, "User-Agent": api.user_agent}
    if content_type:
        headers["Content-Type"] = content_type
    headers.update(_auth_headers(api))
    return headers


def _auth_headers(api: Any) -> dict[str, str]:
    """The client's credentials as headers, asked of its configuration at most every
    ``AUTH_REUSE_SECONDS`` (threads sharing the client may each ask once at a refresh)."""
    now = time.monotonic()
    reused = getattr(api, "_osmo_auth", None)
    if reused is not None and now < reused[0]:
        return reused[1]
    auth = {setting["key"]: setting["value"]
            for setting in api.configuration.auth_settings().values()
            if setting.get("in") == "header" and setting.get("value")}
    api._osmo_auth = (now + AUTH_REUSE_SECONDS, auth)
    return auth


def raw(response: Any) -> dict:
    """The JSON body of a ``_preload_content=False`` call (camelCase dicts, no models),
    decoded with the cyclic GC paused: a LIST of thousands of objects is hundreds of thousands
    of new containers, and the collections they would trigger took four times the decoding."""
    try:
        with collector_paused():
            return orjson.loads(response.data)
    finally:
        response.release_conn()


def status_of(exc: BaseException) -> int | None:
    status = getattr(exc, "status", None)
    return status if isinstance(status, int) and status > 0 else None


def api_errors() -> tuple[type[BaseException], ...]:
    from kubernetes.client.exceptions import ApiException

    return (ApiException, urllib3.exceptions.HTTPError, OSError)


def is_transient(exc: BaseException) -> bool:
    """Worth retrying later: the API server was unreachable, overloaded or failing."""
    status = status_of(exc)
    return status is None or status == 429 or status >= 500


def describe(exc: BaseException) -> str:
    status = status_of(exc)
    reason = getattr(exc, "reason", None) or exc.__class__.__name__
    body = getattr(exc, "body", None)
    message = ""
    if body:
        try:
            message = json.loads(body).get("message", "")
        except (ValueError, AttributeError):
            message = str(body)[:200]
    return f"{status or 'no response'} {reason}{': ' + message if message else ''}"[:500]
