"""Agent steps from LangChain's and LangGraph's own hooks (the `step` and `graph` frames of executor/protocol.ts).

Imported by the runner only once langchain_core is imported (by the bundle, a framework spare or the handler):
a snippet that uses no framework never loads this file. `install(core)`:

- registers a callback handler the way LangChain's own tracers are (`register_configure_hook` with a
  ContextVar, langchain_core/tracers/context.py): the ContextVar's default is our handler, so every callback
  manager LangChain configures, in any thread or task, includes it without the snippet passing `callbacks=`.
  It reports LangGraph nodes (the chain run of each task: metadata `langgraph_node`, `langgraph_step`,
  `langgraph_triggers`), tool runs and model runs (model, token usage), with inputs and outputs made
  JSON-safe and capped, while an invocation runs (nothing otherwise: a spare's warm-up reports nothing);
- wraps `Pregel.stream` / `Pregel.astream` (LangGraph has no hook that hands over the graph being run) to
  report the compiled graph's shape (`get_graph()`: nodes, edges, conditional edges marked) once per
  invocation, when its first graph starts.

Nothing here may fail a run: every hook swallows its own errors (and LangChain's `raise_error` is off).
"""
import sys
import time

# Each input/output is cut to about this much JSON (the frame carries it; the core keeps 2,000 steps).
VALUE_CAP_CHARS = 16 * 1024
_STR_CAP = 4000
_ITEMS_CAP = 100
_DEPTH_CAP = 8

_core = None
_installed = False
_pregel_wrapped = False


_NODES_CAP = 5000


def _safe(value, depth=0, budget=None):
    """A JSON-safe copy of a framework value: messages, pydantic models, dataclasses and named tuples become
    dicts; anything else its repr; strings, lists, depth and the values visited in all are capped."""
    if budget is None:
        budget = [_NODES_CAP]
    budget[0] -= 1
    if budget[0] < 0:
        return "…"
    if value is None or isinstance(value, (bool, int, float)):
        if isinstance(value, float) and value != value:
            return None
        return value
    if isinstance(value, str):
        return value if len(value) <= _STR_CAP else value[:_STR_CAP] + "…[%d chars]" % len(value)
    if depth >= _DEPTH_CAP:
        return "…"
    if isinstance(value, dict):
        out = {}
        for i, (k, v) in enumerate(value.items()):
            if i >= _ITEMS_CAP:
                out["…"] = "%d more" % (len(value) - _ITEMS_CAP)
                break
            out[str(k)] = _safe(v, depth + 1, budget)
        return out
    if isinstance(value, (list, tuple, set, frozenset)):
        items = list(value)
        out = [_safe(v, depth + 1, budget) for v in items[:_ITEMS_CAP]]
        if len(items) > _ITEMS_CAP:
            out.append("…%d more" % (len(items) - _ITEMS_CAP))
        return out
    msg_type = getattr(value, "type", None)
    if isinstance(msg_type, str) and hasattr(value, "content"):  # a LangChain message
        out = {"type": msg_type, "content": _safe(value.content, depth + 1, budget)}
        for attr in ("name", "tool_calls", "tool_call_id", "usage_metadata"):
            v = getattr(value, attr, None)
            if v:
                out[attr] = _safe(v, depth + 1, budget)
        return out
    for dump in ("model_dump", "_asdict"):
        fn = getattr(value, dump, None)
        if callable(fn):
            try:
                return _safe(fn(), depth, budget)
            except Exception:  # noqa: BLE001
                break
    fields = getattr(value, "__dataclass_fields__", None)
    if isinstance(fields, dict):
        return {"_type": type(value).__name__, **{k: _safe(getattr(value, k, None), depth + 1, budget) for k in list(fields)[:_ITEMS_CAP]}}
    try:
        text = repr(value)
    except Exception:  # noqa: BLE001
        text = "<%s>" % type(value).__name__
    return text if len(text) <= 500 else text[:500] + "…"


def _capped(value):
    safe = _safe(value)
    try:
        text = _core._dumps_loose(safe)
    except Exception:  # noqa: BLE001
        return repr(safe)[:VALUE_CAP_CHARS]
    if len(text) <= VALUE_CAP_CHARS:
        return safe
    return {"_truncated": True, "chars": len(text), "preview": text[:VALUE_CAP_CHARS]}


def _emit(inv, frame):
    frame["t"] = "step"
    frame["id"] = inv.id
    frame["framework"] = "langgraph"
    frame["at_ms"] = round((time.perf_counter() - inv.t0) * 1000, 3)
    try:
        line = _core._dumps_loose(frame)
    except Exception:  # noqa: BLE001
        for key in ("input", "output", "meta"):
            frame.pop(key, None)
        line = _core._dumps_loose(frame)
    _core._write_line(line + "\n")


def _running():
    inv = _core._current
    return inv if inv is not None and not inv.done else None


class _Runs:
    """What one invocation's handler remembers: each run's parent, and which runs became steps."""

    __slots__ = ("inv", "parent", "steps", "tasks")

    def __init__(self, inv):
        self.inv = inv
        self.parent = {}  # run id → parent run id (every run seen)
        self.steps = {}  # run id → kind, for the runs reported as steps until they end
        self.tasks = set()  # LangGraph tasks already reported (a node's inner runnables share its name)


_runs = None


def _state(inv):
    global _runs
    if _runs is None or _runs.inv is not inv:
        _runs = _Runs(inv)  # a new invocation: the previous one's runs are forgotten
    return _runs


def _step_parent(runs, parent_run_id):
    """The nearest ancestor run that is a step (LangGraph's inner runnables are not)."""
    seen = 0
    while parent_run_id is not None and seen < 200:
        if parent_run_id in runs.steps:
            return str(parent_run_id)
        parent_run_id = runs.parent.get(parent_run_id)
        seen += 1
    return None


def _model_of(serialized, metadata, kwargs):
    params = kwargs.get("invocation_params") or {}
    for v in (params.get("model"), params.get("model_name"), (metadata or {}).get("ls_model_name")):
        if isinstance(v, str) and v:
            return v
    return None


def _usage_of(response):
    """Token usage of an LLMResult: the provider's `token_usage`, else the message's usage_metadata."""
    try:
        out = (response.llm_output or {}).get("token_usage") or {}
        if out:
            return {k: v for k, v in out.items() if isinstance(v, (int, float))}
        for gens in response.generations or []:
            for g in gens:
                um = getattr(getattr(g, "message", None), "usage_metadata", None)
                if um:
                    return {
                        "prompt_tokens": um.get("input_tokens"),
                        "completion_tokens": um.get("output_tokens"),
                        "total_tokens": um.get("total_tokens"),
                    }
    except Exception:  # noqa: BLE001
        pass
    return None


def _make_handler():
    from langchain_core.callbacks.base import BaseCallbackHandler

    class SvcAgentSteps(BaseCallbackHandler):
        """Reports LangGraph nodes, tools and model calls of the running invocation as `step` frames."""

        run_inline = True  # in the caller's thread, in order (an async manager would otherwise use a pool)
        raise_error = False

        def _start(self, kind, name, run_id, parent_run_id, input_value, meta):
            inv = _running()
            if inv is None:
                return
            runs = _state(inv)
            runs.parent[run_id] = parent_run_id
            runs.steps[run_id] = kind
            frame = {
                "phase": "start",
                "step_id": str(run_id),
                "parent_id": _step_parent(runs, parent_run_id),
                "kind": kind,
                "name": str(name)[:500],
                "input": _capped(input_value),
            }
            if meta:
                frame["meta"] = meta
            _emit(inv, frame)

        def _end(self, run_id, output=None, error=None, meta=None):
            inv = _running()
            if inv is None:
                return
            runs = _state(inv)
            kind = runs.steps.pop(run_id, None)
            if kind is None:
                return
            frame = {"phase": "end", "step_id": str(run_id), "kind": kind, "name": ""}
            if error is not None:
                frame["error"] = ("%s: %s" % (type(error).__name__, error))[:4000]
            else:
                frame["output"] = _capped(output)
            if meta:
                frame["meta"] = meta
            _emit(inv, frame)

        # -- chains: LangGraph nodes -------------------------------------------------------------
        def on_chain_start(self, serialized, inputs, *, run_id, parent_run_id=None, tags=None, metadata=None, **kwargs):
            try:
                inv = _running()
                if inv is None:
                    return
                runs = _state(inv)
                md = metadata or {}
                node = md.get("langgraph_node")
                name = kwargs.get("name")
                task = md.get("langgraph_checkpoint_ns") or (md.get("langgraph_step"), node)
                if node is None or name != node or task in runs.tasks:
                    runs.parent[run_id] = parent_run_id  # not a step: remembered to find a step's parent
                    return
                runs.tasks.add(task)
                meta = {"langgraph_step": md.get("langgraph_step"), "langgraph_triggers": _safe(list(md.get("langgraph_triggers") or []))}
                path = md.get("langgraph_path")
                if path:
                    meta["langgraph_path"] = _safe(path)
                self._start("node", node, run_id, parent_run_id, inputs, meta)
            except Exception:  # noqa: BLE001
                pass

        def on_chain_end(self, outputs, *, run_id, parent_run_id=None, **kwargs):
            try:
                self._end(run_id, output=outputs)
            except Exception:  # noqa: BLE001
                pass

        def on_chain_error(self, error, *, run_id, parent_run_id=None, **kwargs):
            try:
                # GraphInterrupt / a Command bubbling up is control flow, still the node's end.
                self._end(run_id, error=error)
            except Exception:  # noqa: BLE001
                pass

        # -- tools -------------------------------------------------------------------------------
        def on_tool_start(self, serialized, input_str, *, run_id, parent_run_id=None, tags=None, metadata=None, inputs=None, **kwargs):
            try:
                inv = _running()
                if inv is None:
                    return
                name = (serialized or {}).get("name") or kwargs.get("name") or "tool"
                self._start("tool", name, run_id, parent_run_id, inputs if inputs is not None else input_str, None)
            except Exception:  # noqa: BLE001
                pass

        def on_tool_end(self, output, *, run_id, parent_run_id=None, **kwargs):
            try:
                content = getattr(output, "content", output)  # a ToolMessage: its content is the result
                self._end(run_id, output=content)
            except Exception:  # noqa: BLE001
                pass

        def on_tool_error(self, error, *, run_id, parent_run_id=None, **kwargs):
            try:
                self._end(run_id, error=error)
            except Exception:  # noqa: BLE001
                pass

        # -- models ------------------------------------------------------------------------------
        def _llm_start(self, serialized, prompt, run_id, parent_run_id, metadata, kwargs):
            inv = _running()
            if inv is None:
                return
            model = _model_of(serialized, metadata, kwargs)
            name = kwargs.get("name") or (serialized or {}).get("name") or model or "model"
            meta = {"model": model} if model else None
            self._start("llm", name, run_id, parent_run_id, prompt, meta)

        def on_chat_model_start(self, serialized, messages, *, run_id, parent_run_id=None, tags=None, metadata=None, **kwargs):
            try:
                self._llm_start(serialized, messages[0] if len(messages) == 1 else messages, run_id, parent_run_id, metadata, kwargs)
            except Exception:  # noqa: BLE001
                pass

        def on_llm_start(self, serialized, prompts, *, run_id, parent_run_id=None, tags=None, metadata=None, **kwargs):
            try:
                self._llm_start(serialized, prompts, run_id, parent_run_id, metadata, kwargs)
            except Exception:  # noqa: BLE001
                pass

        def on_llm_end(self, response, *, run_id, parent_run_id=None, **kwargs):
            try:
                gens = [g for gs in (response.generations or []) for g in gs]
                out = None
                if gens:
                    g = gens[0]
                    out = getattr(g, "message", None) or getattr(g, "text", None)
                usage = _usage_of(response)
                self._end(run_id, output=out, meta={"usage": usage} if usage else None)
            except Exception:  # noqa: BLE001
                pass

        def on_llm_error(self, error, *, run_id, parent_run_id=None, **kwargs):
            try:
                self._end(run_id, error=error)
            except Exception:  # noqa: BLE001
                pass

    return SvcAgentSteps()


# ---- the graph's shape ---------------------------------------------------------------------------------

_graph_reported_for = [None]


def _report_graph(pregel):
    inv = _running()
    if inv is None or _graph_reported_for[0] is inv:
        return
    _graph_reported_for[0] = inv
    try:
        g = pregel.get_graph()
        nodes = [{"id": str(n.id), "name": str(n.name)} for n in list(g.nodes.values())[:1000]]
        edges = [{"from": str(e.source), "to": str(e.target), "conditional": bool(e.conditional)} for e in list(g.edges)[:5000]]
        line = _core._dumps_loose({"t": "graph", "id": inv.id, "framework": "langgraph", "nodes": nodes, "edges": edges})
        _core._write_line(line + "\n")
    except Exception:  # noqa: BLE001
        pass


def _wrap_pregel():
    """Pregel.stream / astream report the graph first (invoke / ainvoke go through them)."""
    global _pregel_wrapped
    if _pregel_wrapped:
        return
    main = sys.modules.get("langgraph.pregel.main")
    pregel = getattr(main, "Pregel", None) if main is not None else None
    if pregel is None:
        return
    _pregel_wrapped = True
    stream, astream = pregel.stream, pregel.astream

    def svc_stream(self, *args, **kwargs):
        _report_graph(self)
        return stream(self, *args, **kwargs)

    def svc_astream(self, *args, **kwargs):
        _report_graph(self)
        return astream(self, *args, **kwargs)

    for wrapper, real in ((svc_stream, stream), (svc_astream, astream)):
        wrapper.__name__, wrapper.__qualname__, wrapper.__doc__ = real.__name__, real.__qualname__, real.__doc__
        wrapper.__wrapped__ = real
    pregel.stream, pregel.astream = svc_stream, svc_astream


def forget():
    """The invocation ended: nothing of it stays here."""
    global _runs
    _runs = None
    _graph_reported_for[0] = None


def install(core):
    """Registers the handler with langchain_core (once) and wraps LangGraph's Pregel when it is imported."""
    global _core, _installed
    _core = core
    if not _installed and "langchain_core" in sys.modules:
        _installed = True  # first: the import below may come back here (the runner's import watch)
        try:
            from contextvars import ContextVar

            from langchain_core.tracers.context import register_configure_hook

            register_configure_hook(ContextVar("svc_agent_steps", default=_make_handler()), True)
        except Exception as exc:  # noqa: BLE001 - a LangChain without the hook: no steps, the run goes on
            core._note("agent steps are off: %s: %s" % (type(exc).__name__, exc))
    _wrap_pregel()
    return _installed and _pregel_wrapped
