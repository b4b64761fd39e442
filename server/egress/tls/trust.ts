import { readFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { createSecureContext, rootCertificates, type SecureContext } from 'node:tls';

/** Where hosts keep their TLS roots as one PEM file (what OpenSSL in a sandbox reads by default). */
const SYSTEM_BUNDLES = [
  '/etc/ssl/certs/ca-certificates.crt', // Debian, Ubuntu, Arch
  '/etc/pki/tls/certs/ca-bundle.crt', // Fedora, RHEL
  '/etc/ssl/ca-bundle.pem', // openSUSE
  '/etc/ssl/cert.pem', // Alpine, macOS
];

/** The host's TLS roots as PEM: its bundle file, or Node's own copy of Mozilla's list where it has none. */
export async function systemRoots(): Promise<string> {
  for (const p of SYSTEM_BUNDLES) {
    const text = await readFile(p, 'utf8').catch(() => '');
    if (text.includes('-----BEGIN CERTIFICATE-----')) return text;
  }
  return rootCertificates.join('\n');
}

/**
 * The environment variable naming a PEM file of extra roots the core's own upstream connections trust
 * (test and development only: a local HTTPS server with a self-signed certificate standing in for a
 * provider, as test/server/egress-https.test.ts does). Read at each connection; never given to sandboxes.
 */
export const EXTRA_CA_ENV = 'SVC_EMU_EXTRA_CA';

/**
 * The TLS options of an upstream connection the core makes (a terminated tunnel's request, an integration
 * call): none (Node's default roots) unless SVC_EMU_EXTRA_CA names a file, then a secure context with the
 * default roots and that file's certificates, made once per file and kept (a `ca` option would parse every
 * root at every connection: ~0.1 s a request here). The certificate check itself always stays on.
 */
export function upstreamTls(env: NodeJS.ProcessEnv = process.env): { secureContext?: SecureContext } {
  const file = env[EXTRA_CA_ENV];
  if (!file) return {};
  if (cached?.file !== file) {
    try {
      cached = { file, context: createSecureContext({ ca: [...rootCertificates, readFileSync(file, 'utf8')] }) };
    } catch {
      return {};
    }
  }
  return { secureContext: cached.context };
}

/** The one context made for SVC_EMU_EXTRA_CA's file (a test or development setting, fixed for a process). */
let cached: { file: string; context: SecureContext } | null = null;
