"""A LangGraph spare's warm-up (executor/import-profile.ts names it; the runner runs it after the preload, before
any bundle is given, and drops this module afterwards).

1. One agent run of our own: `create_agent` with a `ChatOpenAI` model and one tool, streamed (messages and
   updates) and invoked, against a chat-completions API answered in process by an httpx2 MockTransport — no
   socket, no server, nothing through the egress relay. What a first run does once (pydantic schemas of the
   tool and the messages, the graph's compile path, regex and typing caches) is then done.
2. TLS contexts made ahead (`prebuild_ssl_contexts`): httpcore2 builds a new default SSLContext for every HTTP
   client, loading the system CA file each time (~17 ms under OpenSSL 3.0; ChatOpenAI's first use makes 8: sync
   and async clients, each with the relay's proxy mounts). The spare builds a few with httpcore2's own function,
   and `default_ssl_context` hands each one out once, to the first callers that would have built the same thing
   (SSL_CERT_FILE / SSL_CERT_DIR at the call as they were in the spare's environment: the core names its CA
   bundle there, docs/cassettes.md "HTTPS"); past those, or with either variable changed, it builds one
   as before. Every caller still gets a new context of its own, from the same CA file, with the same
   settings: only when it was built differs (docs/parity.md, "Spare runners (cold starts)").

It leaves nothing a snippet could see beyond the framework's own caches: no env var, no file, no socket, no
thread (the runner checks the env and the threads before and after), nothing registered; and no cache of what
the environment said (langsmith's get_env_var: see warm_up), since a snippet's own environment comes later.
"""

import functools
import os

# What ChatOpenAI's first use in a snippet builds: sync and async clients, each with its proxy mounts.
SSL_CONTEXTS_AHEAD = 8


def prebuild_ssl_contexts(n=SSL_CONTEXTS_AHEAD):
    import httpcore2
    import httpcore2._ssl as _ssl

    original = _ssl.default_ssl_context
    if getattr(original, "_svc_ahead", None) is not None:
        return 0
    # Built as a call in the spare's environment would build it (SSL_CERT_FILE names the core's CA bundle, if any).
    trust = lambda: (os.environ.get("SSL_CERT_FILE") or None, os.environ.get("SSL_CERT_DIR") or None)  # noqa: E731
    built_for = trust()
    ahead = [original() for _ in range(n)]

    @functools.wraps(original)
    def default_ssl_context(*, _trust_env=True):
        if (trust() if _trust_env else (None, None)) != built_for:
            return original(_trust_env=_trust_env)
        try:
            return ahead.pop()  # atomic under the GIL: each one goes to one caller
        except IndexError:
            return original(_trust_env=_trust_env)

    default_ssl_context._svc_ahead = ahead
    import sys

    # The modules that imported the function by name (httpcore2's connections and proxies) and the package.
    for name, mod in list(sys.modules.items()):
        if (name == "httpcore2" or name.startswith("httpcore2.")) and getattr(mod, "default_ssl_context", None) is original:
            mod.default_ssl_context = default_ssl_context
    assert httpcore2.default_ssl_context is default_ssl_context
    return n


def _completion(body):
    """A chat completion: a call of the first tool until a tool has answered, then a short text."""
    messages = body.get("messages") or []
    tools = body.get("tools") or []
    tool = tools[0]["function"]["name"] if tools else None
    if tool and not any(m.get("role") == "tool" for m in messages):
        return {"name": tool, "arguments": '{"city": "Paris"}'}, ""
    return None, "It is sunny in Paris."


def _respond(request):
    import json

    import httpx2

    body = json.loads(request.content or b"{}")
    call, text = _completion(body)
    base = {"id": "chatcmpl-warmup", "created": 0, "model": body.get("model", "warmup"), "system_fingerprint": "fp_warmup"}
    usage = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
    tool_call = call and {"id": "call_warmup", "type": "function", "function": call}
    if not body.get("stream"):
        message = {"role": "assistant", "content": None, "tool_calls": [tool_call]} if call else {"role": "assistant", "content": text}
        choice = {"index": 0, "message": message, "logprobs": None, "finish_reason": "tool_calls" if call else "stop"}
        return httpx2.Response(200, json=dict(base, object="chat.completion", choices=[choice], usage=usage))

    def chunk(delta, finish=None):
        return dict(base, object="chat.completion.chunk", choices=[{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}])

    chunks = [chunk({"role": "assistant", "content": None if call else ""})]
    if call:
        chunks.append(chunk({"tool_calls": [{"index": 0, "id": "call_warmup", "type": "function", "function": {"name": call["name"], "arguments": ""}}]}))
        chunks.append(chunk({"tool_calls": [{"index": 0, "function": {"arguments": call["arguments"]}}]}))
        chunks.append(chunk({}, "tool_calls"))
    else:
        for word in text.split(" "):
            chunks.append(chunk({"content": word + " "}))
        chunks.append(chunk({}, "stop"))
    chunks.append(dict(base, object="chat.completion.chunk", choices=[], usage=usage))
    sse = "".join("data: %s\n\n" % json.dumps(c) for c in chunks) + "data: [DONE]\n\n"
    return httpx2.Response(200, content=sse.encode(), headers={"content-type": "text/event-stream"})


def warm_up():
    import langsmith.utils as ls_utils

    # langsmith caches what it reads of the environment (get_env_var: whether tracing is on, …) on first use: read
    # here, the spare's environment would stick, where a fresh runner's first run reads the tenant's (its
    # invocation env, LANGSMITH_TRACING and the like). During the warm-up it reads without caching.
    cached = ls_utils.get_env_var
    ls_utils.get_env_var = getattr(cached, "__wrapped__", cached)
    try:
        _agent_run()
    finally:
        ls_utils.get_env_var = cached


def _agent_run():
    import httpx2
    from langchain.agents import create_agent
    from langchain_core.messages import AIMessage, AIMessageChunk
    from langchain_core.tools import tool
    from langchain_openai import ChatOpenAI

    @tool
    def get_weather(city: str) -> dict:
        """The weather forecast for a city."""
        return {"city": city, "forecast": "sunny"}

    transport = httpx2.MockTransport(_respond)
    # No connection to close: the mock transport answers in process (the async client is never used by a sync run).
    # trust_env=False: no proxy mounts (each would build a TLS context), nothing read from the environment.
    async_client = httpx2.AsyncClient(transport=transport, trust_env=False)
    with httpx2.Client(transport=transport, trust_env=False) as client:
        model = ChatOpenAI(
            model="warmup-model",
            base_url="http://warmup.invalid/v1",
            api_key="warmup",
            http_client=client,
            http_async_client=async_client,
        )
        agent = create_agent(model, tools=[get_weather], system_prompt="You answer questions about the weather. Use get_weather.")
        question = {"messages": [{"role": "user", "content": "What is the weather in Paris?"}]}
        for mode, data in agent.stream(question, stream_mode=["messages", "updates"]):
            if mode == "messages":
                message, _meta = data
                isinstance(message, AIMessageChunk)
            else:
                for update in data.values():
                    for message in (update or {}).get("messages", []):
                        isinstance(message, AIMessage)
        agent.invoke(question)
