import { describe, it, expect } from 'vitest';
import { createServer, request, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import {
  checkTarget,
  classifyAddress,
  EgressAllowEntry,
  refuseAddress,
  TargetError,
  type EgressRules,
  type LookupAll,
} from '../../server/egress/policy';
import { guardedLookup } from '../../server/webhooks/deliver';

const production: EgressRules = { profile: 'production', allow: [] };
const local: EgressRules = { profile: 'local', allow: [] };

/** A lookup answering from a table; unknown names fail like getaddrinfo does. */
const fakeLookup =
  (table: Record<string, string[]>): LookupAll =>
  async (host) => {
    const addrs = table[host];
    if (!addrs) throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${host}`), { code: 'ENOTFOUND' });
    return addrs.map((address) => ({ address, family: address.includes(':') ? 6 : 4 }));
  };
const noLookup: LookupAll = async (host) => {
  throw new Error(`lookup must not be called for ${host}`);
};

describe('classifyAddress', () => {
  it.each([
    // IPv4
    ['0.0.0.0', 'unspecified'],
    ['0.1.2.3', 'this network'],
    ['10.0.0.1', 'private'],
    ['10.255.255.255', 'private'],
    ['172.16.0.1', 'private'],
    ['172.31.255.255', 'private'],
    ['192.168.1.1', 'private'],
    ['100.64.0.1', 'carrier-grade NAT'],
    ['100.127.255.255', 'carrier-grade NAT'],
    ['100.100.100.200', 'metadata'],
    ['127.0.0.1', 'loopback'],
    ['127.1.2.3', 'loopback'],
    ['169.254.169.254', 'metadata'],
    ['169.254.170.2', 'metadata'],
    ['169.254.1.1', 'link-local'],
    ['192.0.0.8', 'reserved'],
    ['192.0.0.192', 'metadata'],
    ['192.0.2.1', 'documentation'],
    ['198.51.100.7', 'documentation'],
    ['203.0.113.9', 'documentation'],
    ['198.18.0.1', 'benchmarking'],
    ['198.19.255.255', 'benchmarking'],
    ['224.0.0.1', 'multicast'],
    ['239.255.255.250', 'multicast'],
    ['240.0.0.1', 'reserved'],
    ['255.255.255.254', 'reserved'],
    ['255.255.255.255', 'broadcast'],
    // IPv6
    ['::', 'unspecified'],
    ['::1', 'loopback'],
    ['0:0:0:0:0:0:0:1', 'loopback'],
    ['[::1]', 'loopback'],
    ['fc00::1', 'unique local'],
    ['fd12:3456::1', 'unique local'],
    ['fd00:ec2::254', 'metadata'],
    ['FD00:EC2:0:0:0:0:0:254', 'metadata'],
    ['fe80::1', 'link-local'],
    ['fe80::1%eth0', 'link-local'],
    ['FEBF::1', 'link-local'],
    ['fec0::1', 'reserved'],
    ['ff02::1', 'multicast'],
    ['2001:db8::1', 'documentation'],
    ['100::1', 'reserved'],
    ['2001::1', 'reserved'],
    ['2001:0:4136:e378::1', 'reserved'],
    ['2001:2::1', 'benchmarking'],
    ['3fff::1', 'documentation'],
    ['4000::1', 'reserved'],
    // embedded IPv4
    ['::ffff:127.0.0.1', 'loopback (IPv4-mapped)'],
    ['::ffff:7f00:1', 'loopback (IPv4-mapped)'],
    ['::FFFF:10.0.0.1', 'private (IPv4-mapped)'],
    ['::ffff:0a00:0001', 'private (IPv4-mapped)'],
    ['::ffff:169.254.169.254', 'metadata (IPv4-mapped)'],
    ['::127.0.0.1', 'loopback (IPv4-compatible)'],
    ['::ffff:0:192.168.0.1', 'private (IPv4-translated)'],
    ['64:ff9b::a9fe:a9fe', 'metadata (NAT64)'],
    ['64:ff9b::169.254.169.254', 'metadata (NAT64)'],
    ['64:ff9b::7f00:1', 'loopback (NAT64)'],
    ['64:ff9b:1::1', 'private'],
    ['64:ff9b:1::808:808', 'private'],
    ['2002:7f00:0001::', 'loopback (6to4)'],
    ['2002:c0a8:0101::1', 'private (6to4)'],
    // not addresses
    ['example.com', 'invalid'],
    ['', 'invalid'],
    ['1.2.3', 'invalid'],
    ['::ffff:1.2.3.256', 'invalid'],
  ])('%s → %s', (ip, expected) => {
    expect(classifyAddress(ip)).toBe(expected);
  });

  it.each([
    '8.8.8.8',
    '1.1.1.1',
    '172.32.0.1',
    '100.128.0.1',
    '192.169.0.1',
    '2606:4700:4700::1111',
    '2a00:1450:4001:80b::200e',
    '::ffff:8.8.8.8',
    '64:ff9b::808:808',
    '2002:0808:0808::1',
  ])('%s is public', (ip) => {
    expect(classifyAddress(ip)).toBeNull();
  });
});

describe('EgressAllowEntry', () => {
  it.each(['127.0.0.1:9000', '[::1]:8080', 'hooks.internal:443', 'LOCALHOST:1', 'svc_a.local:65535'])('accepts %s', (e) => {
    expect(EgressAllowEntry.safeParse(e).success).toBe(true);
  });
  it.each([
    ['127.0.0.1', /HOST:PORT/],
    ['::1:8080', /HOST:PORT/],
    ['[::1]', /HOST:PORT/],
    ['localhost:0', /1 to 65535/],
    ['localhost:65536', /1 to 65535/],
    ['[example.com]:80', /not an IPv6 address/],
    ['bad host:80', /not an IPv4 address or host name/],
    [':80', /not an IPv4 address or host name/],
  ])('refuses %s', (e, message) => {
    const r = EgressAllowEntry.safeParse(e);
    expect(r.success).toBe(false);
    expect(r.error?.issues[0]?.message).toMatch(message);
  });
});

describe('checkTarget', () => {
  const mixed = fakeLookup({ 'hooks.example.com': ['93.184.216.34', '10.0.0.5'] });

  it('allows a public target under both profiles without a warning', async () => {
    const lookup = fakeLookup({ 'api.example.com': ['93.184.216.34', '2606:2800:220:1::1'] });
    for (const rules of [local, production]) {
      expect(await checkTarget('https://api.example.com/hook', rules, lookup)).toEqual({
        refused: null,
        warning: null,
        addresses: ['93.184.216.34', '2606:2800:220:1::1'],
      });
    }
  });

  it('refuses under production when any resolved address is not public', async () => {
    const v = await checkTarget('https://hooks.example.com/cb', production, mixed);
    expect(v.refused).toBe(
      'production refuses callback targets that resolve to 10.0.0.5 (private); allow it with --egress-allow hooks.example.com:443',
    );
    expect(v.warning).toBeNull();
    expect(v.addresses).toEqual(['93.184.216.34', '10.0.0.5']);
  });

  it('warns under local for the same target', async () => {
    const v = await checkTarget('https://hooks.example.com/cb', local, mixed);
    expect(v.refused).toBeNull();
    expect(v.warning).toBe(
      'production would refuse this target: 10.0.0.5 is private (the emulator allows it under the local egress profile)',
    );
  });

  it('refuses IP literals without resolving them, with the default port of the scheme', async () => {
    const v = await checkTarget('http://169.254.169.254/latest/meta-data/', production, noLookup);
    expect(v).toEqual({
      refused:
        'production refuses callback targets that resolve to 169.254.169.254 (metadata); allow it with --egress-allow 169.254.169.254:80',
      warning: null,
      addresses: ['169.254.169.254'],
    });
    const w = await checkTarget('http://127.0.0.1:9000/', local, noLookup);
    expect(w.warning).toBe(
      'production would refuse this target: 127.0.0.1 is loopback (the emulator allows it under the local egress profile)',
    );
  });

  it('handles bracketed IPv6 hosts and embedded IPv4 in URLs', async () => {
    const v = await checkTarget('http://[::1]:8080/x', production, noLookup);
    expect(v.addresses).toEqual(['::1']);
    expect(v.refused).toMatch(/::1 \(loopback\); allow it with --egress-allow \[::1\]:8080$/);
    // The URL parser rewrites ::ffff:127.0.0.1 to ::ffff:7f00:1; it is still loopback.
    const m = await checkTarget('https://[::FFFF:127.0.0.1]/', production, noLookup);
    expect(m.refused).toMatch(/\(loopback \(IPv4-mapped\)\); allow it with --egress-allow \[::ffff:7f00:1\]:443$/);
    const n = await checkTarget('https://[64:ff9b::169.254.169.254]/', production, noLookup);
    expect(n.refused).toMatch(/metadata \(NAT64\)/);
    // Numeric IPv4 spellings are normalised by the URL parser before classification.
    const h = await checkTarget('http://0x7f.1/', production, noLookup);
    expect(h.addresses).toEqual(['127.0.0.1']);
    expect(h.refused).toMatch(/loopback/);
  });

  it('treats localhost and *.localhost as loopback even when resolution fails', async () => {
    const failing = fakeLookup({});
    for (const host of ['localhost', 'app.localhost', 'LOCALHOST.']) {
      const v = await checkTarget(`http://${host}:3000/`, production, failing);
      expect(v.addresses).toEqual([]);
      expect(v.refused).toMatch(/\(loopback\); allow it with --egress-allow /);
    }
    const w = await checkTarget('http://localhost:3000/', local, failing);
    expect(w.warning).toBe(
      'production would refuse this target: localhost is loopback (the emulator allows it under the local egress profile)',
    );
  });

  it('allows a name that does not resolve (the connect-time check decides)', async () => {
    for (const rules of [local, production]) {
      expect(await checkTarget('https://nowhere.invalid/', rules, fakeLookup({}))).toEqual({ refused: null, warning: null, addresses: [] });
    }
  });

  it('exempts allow-listed targets by host:port or address:port, case-insensitively', async () => {
    const byName: EgressRules = { profile: 'production', allow: ['HOOKS.example.com:443'] };
    const v = await checkTarget('https://hooks.example.com/cb', byName, mixed);
    expect(v.refused).toBeNull();
    expect(v.warning).toBe(
      'production would refuse this target: 10.0.0.5 is private; allowed here by --egress-allow HOOKS.example.com:443',
    );

    const byAddress: EgressRules = { profile: 'production', allow: ['10.0.0.5:443'] };
    expect((await checkTarget('https://hooks.example.com/cb', byAddress, mixed)).refused).toBeNull();

    const v6: EgressRules = { profile: 'production', allow: ['[0:0::1]:8080'] };
    const w = await checkTarget('http://[::1]:8080/', v6, noLookup);
    expect(w.refused).toBeNull();
    expect(w.warning).toMatch(/allowed here by --egress-allow \[0:0::1\]:8080$/);

    // The port must match too.
    expect((await checkTarget('https://hooks.example.com:8443/cb', byName, mixed)).refused).toMatch(/hooks\.example\.com:8443$/);

    // Under local the allow list changes nothing: the parity warning is still given.
    const l = await checkTarget('https://hooks.example.com/cb', { profile: 'local', allow: ['hooks.example.com:443'] }, mixed);
    expect(l.warning).toMatch(/\(the emulator allows it under the local egress profile\)$/);
  });

  it('rejects URLs that are not http(s) or not URLs with invalid_url', async () => {
    for (const url of ['ftp://example.com/', 'file:///etc/passwd', 'javascript:alert(1)', 'not a url', 'http://[fe80::1%25eth0]/']) {
      const err = await checkTarget(url, local, noLookup).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(TargetError);
      expect((err as TargetError).code).toBe('invalid_url');
    }
  });
});

describe('refuseAddress', () => {
  it('refuses non-public addresses under production unless allow-listed; never under local', () => {
    expect(refuseAddress('127.0.0.1', '127.0.0.1', 9000, production)).toBe(
      'production refuses callback targets that resolve to 127.0.0.1 (loopback); allow it with --egress-allow 127.0.0.1:9000',
    );
    expect(refuseAddress('::1', '::1', 80, production)).toMatch(/--egress-allow \[::1\]:80$/);
    expect(refuseAddress('8.8.8.8', '8.8.8.8', 80, production)).toBeNull();
    expect(refuseAddress('127.0.0.1', '127.0.0.1', 9000, { profile: 'production', allow: ['127.0.0.1:9000'] })).toBeNull();
    expect(refuseAddress('127.0.0.1', '127.0.0.1', 9001, { profile: 'production', allow: ['127.0.0.1:9000'] })).not.toBeNull();
    expect(refuseAddress('127.0.0.1', '127.0.0.1', 9000, local)).toBeNull();
  });
});

describe('refuseAddress at connect time (the delivering lookup)', () => {
  describe('in a real http.request', () => {
    async function withServer(fn: (port: number, hits: () => number) => Promise<void>): Promise<void> {
      let hits = 0;
      const server: Server = createServer((_req, res) => {
        hits += 1;
        res.end('ok');
      });
      await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
      try {
        await fn((server.address() as AddressInfo).port, () => hits);
      } finally {
        await new Promise<void>((r) => server.close(() => r()));
      }
    }

    const get = (port: number, rules: EgressRules) =>
      new Promise<{ status: number; body: string }>((resolve, reject) => {
        const req = request(
          {
            host: 'localhost',
            port,
            path: '/',
            family: 4,
            agent: false,
            lookup: guardedLookup((address, host, p) => refuseAddress(address, host, p, rules), port),
          },
          (res) => {
            let body = '';
            res.setEncoding('utf8').on('data', (c: string) => (body += c));
            res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
          },
        );
        req.on('error', reject);
        req.end();
      });

    it('refuses localhost under production; the server sees no request', async () => {
      await withServer(async (port, hits) => {
        const err = (await get(port, production).catch((e: unknown) => e)) as NodeJS.ErrnoException;
        expect(err.code).toBe('EGRESS_REFUSED');
        expect(err.message).toBe(
          `production refuses callback targets that resolve to 127.0.0.1 (loopback); allow it with --egress-allow localhost:${port}`,
        );
        expect(hits()).toBe(0);
      });
    });

    it('connects under local', async () => {
      await withServer(async (port, hits) => {
        expect(await get(port, local)).toEqual({ status: 200, body: 'ok' });
        expect(hits()).toBe(1);
      });
    });

    it('connects under production with an allow entry for localhost:<port>', async () => {
      await withServer(async (port, hits) => {
        expect(await get(port, { profile: 'production', allow: [`localhost:${port}`] })).toEqual({ status: 200, body: 'ok' });
        expect(hits()).toBe(1);
      });
    });
  });
});
