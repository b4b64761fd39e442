/** Prometheus text exposition of the core's own counters. Small on purpose: no client library needed. */
const BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

interface Histogram {
  counts: number[];
  sum: number;
  count: number;
}

const esc = (v: string) => v.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n');

export class Metrics {
  private readonly requests = new Map<string, number>();
  private readonly durations = new Map<string, Histogram>();
  private readonly gauges = new Map<string, { help: string; read: () => number }>();

  observeRequest(method: string, route: string, status: number, seconds: number): void {
    const key = `method="${esc(method)}",route="${esc(route)}",status="${status}"`;
    this.requests.set(key, (this.requests.get(key) ?? 0) + 1);
    const hkey = `method="${esc(method)}",route="${esc(route)}"`;
    let h = this.durations.get(hkey);
    if (!h) this.durations.set(hkey, (h = { counts: BUCKETS.map(() => 0), sum: 0, count: 0 }));
    BUCKETS.forEach((b, i) => {
      if (seconds <= b) h.counts[i]!++;
    });
    h.sum += seconds;
    h.count++;
  }

  gauge(name: string, help: string, read: () => number): void {
    this.gauges.set(name, { help, read });
  }

  render(): string {
    const out: string[] = [];
    out.push('# HELP svc_emu_http_requests_total HTTP requests served.', '# TYPE svc_emu_http_requests_total counter');
    for (const [k, v] of this.requests) out.push(`svc_emu_http_requests_total{${k}} ${v}`);
    out.push(
      '# HELP svc_emu_http_request_duration_seconds Time to answer a request.',
      '# TYPE svc_emu_http_request_duration_seconds histogram',
    );
    for (const [k, h] of this.durations) {
      BUCKETS.forEach((b, i) => out.push(`svc_emu_http_request_duration_seconds_bucket{${k},le="${b}"} ${h.counts[i]}`));
      out.push(`svc_emu_http_request_duration_seconds_bucket{${k},le="+Inf"} ${h.count}`);
      out.push(`svc_emu_http_request_duration_seconds_sum{${k}} ${h.sum}`);
      out.push(`svc_emu_http_request_duration_seconds_count{${k}} ${h.count}`);
    }
    for (const [name, g] of this.gauges) out.push(`# HELP ${name} ${g.help}`, `# TYPE ${name} gauge`, `${name} ${g.read()}`);
    return out.join('\n') + '\n';
  }
}
