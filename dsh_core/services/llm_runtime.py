"""The default LLM runtime (``ctx.llm``): adapters by provider, and streams that always end in one ``Finish``.

Adapters are registered per provider (``ctx.llm.register_adapter("deepseek", adapter)``) and
selected by a model string ``provider/model``. ``stream(request)`` is the one way the loop talks to
a model: whatever the adapter does — raise when opened, raise half-way, stop without a ``Finish``,
name an unknown provider — the stream ends with exactly one ``Finish`` chunk, so the loop reads
failures as data. Cancellation is never turned into data: it propagates, and the adapter's stream
is closed on the way out.

Error tree (besides ``DuplicateRegistrationError`` for a provider registered twice)::

    DshError
      + UnknownProviderError(DshError, LookupError)   .provider, .registered
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from types import AsyncGeneratorType
from typing import TYPE_CHECKING, Final, Protocol, cast

import anyio

from dsh_core.vocabulary._errors import DshError, DuplicateRegistrationError
from dsh_core.vocabulary._llm_types import (
    Chunk,
    Failure,
    Finish,
    LlmAdapter,
    LlmRequest,
    ModelInfo,
    ReasoningDelta,
    TextDelta,
    ToolCallDelta,
    Usage,
)

if TYPE_CHECKING:
    from dsh_core.host._context import Context, Disposer

__all__ = ["LlmPlugin", "LlmRuntime", "LlmService", "UnknownProviderError", "failure_from_exception"]

logger = logging.getLogger("dsh.llm")

#: How long closing an adapter's stream may take, shielded from cancellation (R13: cleanup is
#: shielded and time-limited, so an abort neither leaks a connection nor hangs on a stuck close).
CLOSE_TIMEOUT: Final = 5.0

_MODEL_STRING_HINT: Final = "expected 'provider/model', e.g. 'deepseek/deepseek-v4-flash'"


class UnknownProviderError(DshError, LookupError):
    """No adapter is registered for the provider a model string names."""

    def __init__(self, message: str, *, provider: str, registered: tuple[str, ...]) -> None:
        super().__init__(message)
        self.provider = provider
        self.registered = registered


class LlmService(Protocol):
    """What ``ctx.llm`` offers, and what a replacement ``llm`` service must provide (after ``bind(ctx)``)."""

    def register_adapter(self, provider: str, adapter: LlmAdapter) -> Disposer: ...

    @property
    def providers(self) -> tuple[str, ...]: ...

    def resolve(self, model_string: str) -> tuple[str, str, LlmAdapter]: ...

    def model_info(self, model_string: str) -> ModelInfo: ...

    def stream(self, request: LlmRequest) -> AsyncGenerator[Chunk, None]: ...


class _Route:
    """One registration: the adapter and who registered it (for the duplicate error)."""

    __slots__ = ("adapter", "owner")

    def __init__(self, adapter: LlmAdapter, owner: str) -> None:
        self.adapter = adapter
        self.owner = owner


class LlmRuntime:
    """The ``llm`` service: a provider → adapter table and the failure-normalising ``stream``.

    Seen through ``ctx.llm``, the runtime is bound to that context: an adapter registered through
    it is unregistered when the context is disposed. Every view shares one table.
    """

    __slots__ = ("_ctx", "_routes")

    def __init__(self) -> None:
        self._routes: dict[str, _Route] = {}
        self._ctx: Context | None = None

    def bind(self, ctx: Context) -> LlmRuntime:
        """This runtime as seen from ``ctx``: registrations become effects of ``ctx``."""
        view = LlmRuntime.__new__(LlmRuntime)
        view._routes = self._routes
        view._ctx = ctx
        return view

    # ------------------------------------------------------------------ registry

    def register_adapter(self, provider: str, adapter: LlmAdapter) -> Disposer:
        """Route model strings ``<provider>/...`` to ``adapter``; returns the disposer.

        The disposer is idempotent and removes exactly this registration (never a later one for
        the same provider). Through ``ctx.llm`` it also runs when ``ctx`` is disposed.

        :raises TypeError: ``provider`` is not a str, or ``adapter`` lacks ``stream``/``model_info``.
        :raises ValueError: ``provider`` is empty, contains ``/`` or surrounding spaces.
        :raises DuplicateRegistrationError: the provider already has an adapter.
        """
        if not isinstance(provider, str):
            msg = (
                f"register_adapter: provider must be a str such as 'deepseek', got {type(provider).__name__}"
            )
            raise TypeError(msg)
        if not provider or "/" in provider or provider.strip() != provider:
            msg = (
                f"register_adapter: provider {provider!r} must be a non-empty name without '/' or "
                f"surrounding spaces (model strings are 'provider/model')"
            )
            raise ValueError(msg)
        for method in ("stream", "model_info"):
            if not callable(getattr(adapter, method, None)):
                msg = (
                    f"register_adapter({provider!r}, ...): {type(adapter).__name__} is not an LLM adapter: "
                    f"it has no {method}() method (an adapter has stream(request) and model_info(model))"
                )
                raise TypeError(msg)
        taken = self._routes.get(provider)
        if taken is not None:
            msg = (
                f"provider {provider!r} already has an adapter ({type(taken.adapter).__name__}, registered "
                f"by {taken.owner}); dispose that registration first or use another provider name"
            )
            raise DuplicateRegistrationError(msg)
        route = _Route(adapter, repr(self._ctx.label) if self._ctx is not None else "an unbound runtime")
        self._routes[provider] = route

        def unregister() -> None:
            if self._routes.get(provider) is route:
                del self._routes[provider]

        return unregister if self._ctx is None else self._ctx.effect(unregister)

    @property
    def providers(self) -> tuple[str, ...]:
        """The providers that have an adapter, sorted."""
        return tuple(sorted(self._routes))

    def resolve(self, model_string: str) -> tuple[str, str, LlmAdapter]:
        """Split ``provider/model`` and find the provider's adapter: ``(provider, model, adapter)``.

        Only the first ``/`` separates: ``openrouter/meta/llama`` is model ``meta/llama``.

        :raises TypeError: ``model_string`` is not a str.
        :raises ValueError: it is not of the form ``provider/model``.
        :raises UnknownProviderError: no adapter is registered for the provider (the message
            lists the registered ones).
        """
        if not isinstance(model_string, str):
            msg = f"model must be a str ({_MODEL_STRING_HINT}), got {type(model_string).__name__}"
            raise TypeError(msg)
        provider, slash, model = model_string.partition("/")
        if not slash or not provider or not model:
            msg = f"model {model_string!r} is not a model string: {_MODEL_STRING_HINT}"
            raise ValueError(msg)
        route = self._routes.get(provider)
        if route is None:
            raise self._unknown(provider, model_string)
        return provider, model, route.adapter

    def model_info(self, model_string: str) -> ModelInfo:
        """The context window and output limit of ``provider/model``, as its adapter reports them.

        :raises TypeError, ValueError, UnknownProviderError: as ``resolve``; also ``TypeError`` if
            the adapter returns something other than a ``ModelInfo``. The adapter's own errors
            (an unknown model, say) propagate unchanged.
        """
        _, model, adapter = self.resolve(model_string)
        info = adapter.model_info(model)
        if not isinstance(info, ModelInfo):
            msg = f"adapter {type(adapter).__name__}.model_info({model!r}) returned {type(info).__name__}, not a ModelInfo"
            raise TypeError(msg)
        return info

    def _unknown(self, provider: str, model_string: str) -> UnknownProviderError:
        registered = self.providers
        known = (
            ", ".join(repr(name) for name in registered) if registered else "none (load an adapter plugin)"
        )
        msg = f"no LLM adapter is registered for provider {provider!r} (model {model_string!r}); registered providers: {known}"
        return UnknownProviderError(msg, provider=provider, registered=registered)

    # ------------------------------------------------------------------ streaming

    async def stream(self, request: LlmRequest) -> AsyncGenerator[Chunk, None]:
        """Stream the model's chunks for ``request``, ending with exactly one ``Finish``.

        Every adapter failure becomes the final chunk instead of an exception:

        * the signal already cancelled, or cancelled while chunks arrive, or cancelled when the
          adapter fails: ``Finish("aborted", Failure(code="ABORTED"))``;
        * an unknown provider: ``Finish("error", Failure(code="BAD_REQUEST"))`` naming the
          registered providers;
        * the adapter raises (when opened or mid-stream): ``Finish("error", failure_from_exception(exc))``;
        * the adapter stops without a ``Finish``: ``EMPTY_RESPONSE`` if it yielded nothing, else
          ``TRANSPORT`` ("stream ended without a finish").

        An adapter's own ``Finish(reason="error")`` becomes ``aborted`` when the signal is
        cancelled or its code is ``ABORTED``; an ``aborted`` finish without a failure gets one.
        Chunks after the ``Finish`` are dropped. The adapter's stream is closed (``aclose``) on
        every exit path, shielded for at most ``CLOSE_TIMEOUT`` seconds. Cancellation of the
        consuming task propagates untouched.
        """
        signal = request.signal
        if signal is not None and signal.cancelled:
            yield _aborted(signal)
            return
        route = self._routes.get(request.provider)
        if route is None:
            error = self._unknown(request.provider, f"{request.provider}/{request.model}")
            yield Finish("error", Failure(str(error), "BAD_REQUEST"))
            return
        chunks: object = None
        streamed = False
        settled = False  # we got to a final chunk ourselves: no cancellation is in flight
        final: Finish
        try:
            try:
                chunks = route.adapter.stream(request)
                # an `async def stream` that returns an iterator (an async generator is not awaitable:
                # asked first, it spares the ABC check of isawaitable)
                if chunks.__class__ is not AsyncGeneratorType and inspect.isawaitable(chunks):
                    chunks = await chunks
                # The per-chunk path: one set lookup, one signal test, one yield.
                # (cast once per request: a non-iterator raises TypeError here, made an error Finish)
                async for chunk in cast("AsyncIterator[Chunk]", chunks):
                    if chunk.__class__ in _DELTA_TYPES:
                        if signal is not None and signal.cancelled:
                            final = _aborted(signal)
                            break
                        streamed = True
                        yield chunk
                    elif isinstance(chunk, Finish):
                        final = _settle(chunk, signal)
                        break
                    else:
                        final = _not_a_chunk(request, chunk)
                        break
                else:
                    final = _unfinished(request, signal, streamed=streamed)
                settled = True
            except Exception as exc:  # noqa: BLE001 - an adapter failure is data; cancellation is a BaseException
                cancelled = signal is not None and signal.cancelled
                final = _aborted(signal) if cancelled else Finish("error", failure_from_exception(exc))
                settled = True
        finally:
            # Closed before the Finish is handed out, so a consumer that stops reading at the
            # Finish (without closing this stream) still leaves no adapter stream open.
            if chunks is not None:
                await _close(chunks, shielded=not settled)
        yield final


_DELTA_TYPES: Final = frozenset({TextDelta, ReasoningDelta, ToolCallDelta, Usage})


def _not_a_chunk(request: LlmRequest, item: object) -> Finish:
    message = (
        f"the {request.provider!r} adapter yielded a {type(item).__name__}, not a stream chunk "
        "(TextDelta, ReasoningDelta, ToolCallDelta, Usage or Finish)"
    )
    return Finish("error", Failure(message, "UNKNOWN"))


def _unfinished(request: LlmRequest, signal: object, *, streamed: bool) -> Finish:
    """The ``Finish`` for an adapter stream that simply stopped."""
    if getattr(signal, "cancelled", False):
        return _aborted(signal)
    if streamed:
        return Finish("error", Failure("stream ended without a finish", "TRANSPORT"))
    message = f"the {request.provider!r} adapter ended its stream without any chunk or finish"
    return Finish("error", Failure(message, "EMPTY_RESPONSE"))


def failure_from_exception(exc: BaseException) -> Failure:
    """Normalise an adapter's exception: most specific first.

    An exception carrying a ``failure`` attribute that is a ``Failure`` (how an adapter reports a
    classified error) gives that failure; ``TimeoutError`` (also ``anyio.fail_after``'s) is
    ``TIMEOUT``; ``ConnectionError`` is ``TRANSPORT``; anything else is ``UNKNOWN``. The message is
    the exception's text (its type name when it has none).
    """
    carried = getattr(exc, "failure", None)
    if isinstance(carried, Failure):
        return carried
    message = str(exc) or type(exc).__name__
    if isinstance(exc, TimeoutError):
        return Failure(message, "TIMEOUT")
    if isinstance(exc, ConnectionError):
        return Failure(message, "TRANSPORT")
    return Failure(message, "UNKNOWN")


def _aborted(signal: object) -> Finish:
    reason = getattr(signal, "reason", None)
    why = f": {reason}" if isinstance(reason, str) and reason else ""
    return Finish("aborted", Failure(f"the request was cancelled{why}", "ABORTED"))


def _settle(finish: Finish, signal: object) -> Finish:
    """The adapter's own ``Finish``, with an abort recognised and an aborted one given a failure."""
    reason = finish.reason
    if reason == "error":
        if getattr(signal, "cancelled", False):
            return _aborted(signal)
        if finish.error is not None and finish.error.code == "ABORTED":
            return Finish("aborted", finish.error)
    elif reason == "aborted" and finish.error is None:
        return _aborted(signal)
    return finish


async def _close(chunks: object, *, shielded: bool) -> None:
    """Close the adapter's stream; a stream that already ended is left.

    Under cancellation (``shielded``) the close still runs, for at most ``CLOSE_TIMEOUT`` seconds;
    on the ordinary path no timer is armed (this runs once per request).
    """
    if chunks.__class__ is AsyncGeneratorType:  # the usual adapter
        if chunks.ag_frame is None:
            return  # a generator that raised or returned is finished already
        if not shielded:  # once per request: no helper coroutine, no awaitable check
            try:
                await chunks.aclose()
            except Exception:
                logger.exception("closing the adapter's stream failed (contained: the stream had already ended)")
            return
    aclose: Callable[[], object] | None = getattr(chunks, "aclose", None)
    if aclose is None:
        return  # nothing to close
    if not shielded:
        await _call_aclose(aclose)
        return
    with anyio.move_on_after(CLOSE_TIMEOUT, shield=True):
        await _call_aclose(aclose)


async def _call_aclose(aclose: Callable[[], object]) -> None:
    try:
        result = aclose()
        if inspect.isawaitable(result):
            await result
    except Exception:
        logger.exception("closing the adapter's stream failed (contained: the stream had already ended)")


class LlmPlugin:
    """The default ``llm`` service: an empty adapter table; adapter plugins register into it."""

    name = "llm"
    provides = ("llm",)

    def start(self, ctx: Context) -> None:
        ctx.provide("llm", LlmRuntime())
