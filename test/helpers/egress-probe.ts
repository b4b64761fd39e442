/**
 * The snippet the egress tests run (test/runners/egress.test.ts through a bare runner,
 * test/executor/egress.test.ts through the executor and bubblewrap): one handler per runtime whose
 * `op` says what to try — read the proxy variables, make an HTTP call with each client the runtime has,
 * move a large body up or down, or open a raw TCP socket.
 */
import type { Runtime } from '../executor/_helpers';

export const EGRESS_PROBE: Record<Runtime, string> = {
  bun: `import net from "node:net";
const PROXY_RE = /proxy|^SVC_EGRESS/i;
function pattern(n) { const b = new Uint8Array(n); for (let i = 0; i < n; i++) b[i] = (i * 31 + 7) & 0xff; return b; }
function same(a, b) { if (a.length !== b.length) return false; for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false; return true; }
export default async function handler(input) {
  switch (input.op) {
    case "env":
      return Object.fromEntries(Object.entries(process.env).filter(([k]) => PROXY_RE.test(k)));
    case "fetch": {
      try {
        const r = await fetch(input.url, { signal: AbortSignal.timeout(5000) });
        return { status: r.status, body: await r.text() };
      } catch (e) { return { error: String(e?.code ?? e) }; }
    }
    case "big": {
      const r = await fetch("http://example.test/big?n=" + input.n);
      const got = new Uint8Array(await r.arrayBuffer());
      return { status: r.status, bytes: got.length, intact: same(got, pattern(input.n)) };
    }
    case "echo": {
      const r = await fetch("http://example.test/echo", { method: "POST", body: pattern(input.n) });
      const got = new Uint8Array(await r.arrayBuffer());
      return { status: r.status, bytes: got.length, intact: same(got, pattern(input.n)) };
    }
    case "connect":
      return await new Promise((resolve) => {
        const s = net.connect({ host: input.host, port: input.port });
        const t = setTimeout(() => { s.destroy(); resolve({ ok: false, error: "no answer in 2 s" }); }, 2000);
        s.on("connect", () => { clearTimeout(t); s.destroy(); resolve({ ok: true }); });
        s.on("error", (e) => { clearTimeout(t); resolve({ ok: false, error: String(e?.code ?? e) }); });
      });
  }
  throw new Error("unknown op " + input.op);
}
`,
  python: `import os
import socket
import urllib.request

def _pattern(n):
    return bytes(((i * 31 + 7) & 0xFF) for i in range(n))

_client = None

def handler(input):
    op = input["op"]
    if op == "env":
        return {k: v for k, v in os.environ.items() if "proxy" in k.lower() or k.startswith("SVC_EGRESS")}
    if op == "urllib":
        try:
            with urllib.request.urlopen(input["url"], timeout=5) as r:
                return {"status": r.status, "body": r.read().decode()}
        except Exception as e:
            return {"error": "%s: %s" % (type(e).__name__, e)}
    if op == "requests":
        try:
            import requests
        except ImportError:
            return {"skipped": "requests is not installed"}
        r = requests.get(input["url"], timeout=5)
        return {"status": r.status_code, "body": r.text}
    if op == "httpx":
        try:
            import httpx
        except ImportError:
            return {"skipped": "httpx is not installed"}
        r = httpx.get(input["url"], timeout=5)
        return {"status": r.status_code, "body": r.text}
    if op == "httpx_client":
        # one client for the runner's life: its pooled connection must not outlive the invocation
        global _client
        try:
            import httpx
        except ImportError:
            return {"skipped": "httpx is not installed"}
        if _client is None:
            _client = httpx.Client(timeout=5)
        r = _client.get(input["url"])
        return {"status": r.status_code, "body": r.text}
    if op == "big":
        with urllib.request.urlopen("http://example.test/big?n=%d" % input["n"], timeout=10) as r:
            got = r.read()
        return {"status": 200, "bytes": len(got), "intact": got == _pattern(input["n"])}
    if op == "echo":
        data = _pattern(input["n"])
        req = urllib.request.Request("http://example.test/echo", data=data, method="POST")
        with urllib.request.urlopen(req, timeout=10) as r:
            got = r.read()
        return {"status": r.status, "bytes": len(got), "intact": got == data}
    if op == "connect":
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.settimeout(2)
        try:
            s.connect((input["host"], input["port"]))
            return {"ok": True}
        except OSError as e:
            return {"ok": False, "error": type(e).__name__ + ": " + str(e)}
        finally:
            s.close()
    raise ValueError("unknown op %r" % op)
`,
};

export const PROXY_ENV = ['HTTP_PROXY', 'HTTPS_PROXY', 'http_proxy', 'https_proxy', 'ALL_PROXY'];
