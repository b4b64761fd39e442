import {
  createHash,
  createPrivateKey,
  createPublicKey,
  generateKeyPairSync,
  randomBytes,
  sign,
  X509Certificate,
  type KeyObject,
} from 'node:crypto';
import { chmod, mkdir, readFile, rename, writeFile } from 'node:fs/promises';
import { isIP } from 'node:net';
import { join } from 'node:path';
import { createSecureContext, type SecureContext } from 'node:tls';
import forge from 'node-forge';
import { systemRoots } from './trust';

/**
 * The egress CA of one data dir (record and replay of HTTPS; docs/cassettes.md "HTTPS", docs/security.md):
 * `<data-dir>/egress-ca/` holds its key (`ca-key.pem`, 0600, never bound into a sandbox), its certificate
 * (`ca-cert.pem`) and the bundle sandboxes trust (`ca-bundle.pem`: the host's roots, then ours). Made when a
 * core first starts on the data dir (runners name the bundle from their start), kept across restarts. Leaf
 * certificates (one per host name or address) are signed on the fly with one key per core process and kept in
 * a bounded LRU. Trusted by nothing outside the sandbox.
 *
 * Keys are ECDSA P-256 (made in ~1 ms, where RSA-2048 takes 0.1–1 s: every test's fresh data dir makes one).
 * node-forge writes the certificates' ASN.1 (Node has no X.509 writer, and forge itself knows only RSA keys:
 * its key and signature fields are replaced here); Node's crypto signs.
 */
export class EgressCa {
  /** Leaf certificates kept (by host): a run talks to a handful of hosts; the bound keeps a long-lived core small. */
  static readonly LEAF_CACHE = 256;
  private readonly leaves = new Map<string, SecureContext>();
  private leafKey: { key: KeyObject; pem: string } | null = null;

  private constructor(
    readonly dir: string,
    /** The CA certificate (PEM). */
    readonly certPem: string,
    private readonly key: KeyObject,
    /** The CA's subject, as its certificate encodes it (the leaves' issuer, byte for byte). */
    private readonly subject: forge.asn1.Asn1,
    /** The file sandboxes name in SSL_CERT_FILE & co.: the host's roots, then this CA. */
    readonly bundlePath: string,
  ) {}

  /** The CA of `dataDir` (`<dataDir>/egress-ca/`), made now if there is none (or it is damaged, or expires within 30 days). */
  static async open(dataDir: string, now: () => Date = () => new Date()): Promise<EgressCa> {
    const dir = join(dataDir, 'egress-ca');
    await mkdir(dir, { recursive: true, mode: 0o700 });
    await chmod(dir, 0o700);
    const keyPath = join(dir, 'ca-key.pem');
    const certPath = join(dir, 'ca-cert.pem');
    let keyPem: string;
    let certPem: string;
    try {
      [keyPem, certPem] = await Promise.all([readFile(keyPath, 'utf8'), readFile(certPath, 'utf8')]);
      const x = new X509Certificate(certPem);
      if (!x.ca || !x.checkPrivateKey(createPrivateKey(keyPem)) || new Date(x.validTo).getTime() < now().getTime() + 30 * 86400_000)
        throw new Error('renew');
    } catch {
      ({ keyPem, certPem } = makeCa(dataDir, now()));
      // Key first, each file complete before it has its name: a crash leaves the old pair or a new key beside an old cert (remade).
      await atomicWrite(keyPath, keyPem, 0o600);
      await atomicWrite(certPath, certPem, 0o644);
    }
    await chmod(keyPath, 0o600);
    const bundlePath = join(dir, 'ca-bundle.pem');
    const roots = await systemRoots();
    // Readable by a root core's sandbox user (another uid): it holds certificates only.
    await atomicWrite(bundlePath, `${roots.trimEnd()}\n\n# The Snippet Emulator's egress CA (${dir})\n${certPem.trimEnd()}\n`, 0o644);
    const tbs = forge.asn1.fromDer(forge.pem.decode(certPem)[0]!.body).value[0] as forge.asn1.Asn1;
    const subject = (tbs.value as forge.asn1.Asn1[])[5]!;
    return new EgressCa(dir, certPem, createPrivateKey(keyPem), subject, bundlePath);
  }

  /** A TLS server context presenting a certificate for `host` (a name or an address), signed by this CA. */
  context(host: string): SecureContext {
    const name = host.replace(/^\[|\]$/g, '').toLowerCase();
    const hit = this.leaves.get(name);
    if (hit) {
      this.leaves.delete(name);
      this.leaves.set(name, hit);
      return hit;
    }
    this.leafKey ??= ecKey();
    const at = Date.now();
    const pem = certificate({
      subject: forge.pki.distinguishedNameToAsn1({ attributes: attrs([{ name: 'commonName', value: name.slice(0, 64) }]) }),
      issuer: this.subject,
      notBefore: new Date(at - 86400_000),
      notAfter: new Date(at + 365 * 86400_000),
      publicKey: createPublicKey(this.leafKey.key),
      issuerKey: createPublicKey(this.key),
      extensions: [
        { name: 'basicConstraints', cA: false, critical: true },
        { name: 'keyUsage', digitalSignature: true, critical: true },
        { name: 'extKeyUsage', serverAuth: true },
        { name: 'subjectAltName', altNames: [isIP(name) ? { type: 7, ip: name } : { type: 2, value: name }] },
      ],
      signer: this.key,
    });
    const ctx = createSecureContext({ key: this.leafKey.pem, cert: `${pem}${this.certPem}` });
    this.leaves.set(name, ctx);
    if (this.leaves.size > EgressCa.LEAF_CACHE) this.leaves.delete(this.leaves.keys().next().value!);
    return ctx;
  }
}

function makeCa(dataDir: string, at: Date): { keyPem: string; certPem: string } {
  const { key, pem } = ecKey();
  const subject = forge.pki.distinguishedNameToAsn1({
    attributes: attrs([
      { name: 'commonName', value: 'Snippet Emulator egress CA' },
      { name: 'organizationName', value: 'Snippet Emulator (local, sandbox only)' },
      // Which data dir: two workspaces' CAs are told apart in a certificate viewer.
      { name: 'organizationalUnitName', value: dataDir.slice(-64) },
    ]),
  });
  const publicKey = createPublicKey(key);
  const certPem = certificate({
    subject,
    issuer: subject,
    notBefore: new Date(at.getTime() - 86400_000),
    notAfter: new Date(at.getTime() + 10 * 365 * 86400_000),
    publicKey,
    issuerKey: publicKey,
    extensions: [
      { name: 'basicConstraints', cA: true, pathLenConstraint: 0, critical: true },
      { name: 'keyUsage', keyCertSign: true, cRLSign: true, critical: true },
    ],
    signer: key,
  });
  return { keyPem: pem, certPem };
}

const { asn1 } = forge;
const ECDSA_WITH_SHA256 = '1.2.840.10045.4.3.2';

/** Attribute names as forge's DN writer wants them (with their OIDs). */
function attrs(list: { name: string; value: string }[]): forge.pki.CertificateField[] {
  return list.map((a) => ({ ...a, type: forge.pki.oids[a.name] as string, valueTagClass: asn1.Type.UTF8 as unknown as forge.asn1.Class }));
}

/** A key identifier: SHA-1 of the key's SubjectPublicKeyInfo (RFC 5280 4.2.1.2 allows any unique method). */
const keyId = (k: KeyObject) =>
  createHash('sha1')
    .update(k.export({ type: 'spki', format: 'der' }))
    .digest('binary');

/**
 * An X.509 v3 certificate (PEM) for an ECDSA P-256 key, signed ecdsa-with-SHA256: forge writes the
 * TBSCertificate (with a stand-in RSA key it knows how to write), whose signature algorithm and key
 * fields are then replaced by ours; Node signs it.
 */
function certificate(o: {
  subject: forge.asn1.Asn1;
  issuer: forge.asn1.Asn1;
  notBefore: Date;
  notAfter: Date;
  publicKey: KeyObject;
  issuerKey: KeyObject;
  extensions: object[];
  signer: KeyObject;
}): string {
  const cert = forge.pki.createCertificate();
  cert.publicKey = STAND_IN;
  cert.serialNumber = serial();
  cert.validity.notBefore = o.notBefore;
  cert.validity.notAfter = o.notAfter;
  cert.setExtensions([
    ...o.extensions,
    { name: 'subjectKeyIdentifier', value: asn1.create(asn1.Class.UNIVERSAL, asn1.Type.OCTETSTRING, false, keyId(o.publicKey)) },
    {
      name: 'authorityKeyIdentifier',
      value: asn1.create(asn1.Class.UNIVERSAL, asn1.Type.SEQUENCE, true, [
        asn1.create(asn1.Class.CONTEXT_SPECIFIC, 0, false, keyId(o.issuerKey)),
      ]),
    },
  ]);
  const algorithm = () =>
    asn1.create(asn1.Class.UNIVERSAL, asn1.Type.SEQUENCE, true, [
      asn1.create(asn1.Class.UNIVERSAL, asn1.Type.OID, false, asn1.oidToDer(ECDSA_WITH_SHA256).getBytes()),
    ]);
  cert.siginfo.algorithmOid = forge.pki.oids.sha256WithRSAEncryption!;
  const tbs = (forge.pki as unknown as { getTBSCertificate(c: forge.pki.Certificate): forge.asn1.Asn1 }).getTBSCertificate(cert);
  const fields = tbs.value as forge.asn1.Asn1[];
  fields[2] = algorithm();
  fields[3] = o.issuer;
  fields[5] = o.subject;
  fields[6] = asn1.fromDer(o.publicKey.export({ type: 'spki', format: 'der' }).toString('binary'));
  const tbsDer = asn1.toDer(tbs).getBytes();
  const signature = sign('sha256', Buffer.from(tbsDer, 'binary'), o.signer).toString('binary');
  const whole = asn1.create(asn1.Class.UNIVERSAL, asn1.Type.SEQUENCE, true, [
    tbs,
    algorithm(),
    asn1.create(asn1.Class.UNIVERSAL, asn1.Type.BITSTRING, false, `\x00${signature}`),
  ]);
  return forge.pem.encode({ type: 'CERTIFICATE', body: asn1.toDer(whole).getBytes() });
}

/** forge's TBSCertificate writer needs an RSA key to write; its field is replaced (any tiny key does). */
const STAND_IN = forge.pki.setRsaPublicKey(new forge.jsbn.BigInteger('3', 10), new forge.jsbn.BigInteger('3', 10));

function ecKey(): { key: KeyObject; pem: string } {
  const { privateKey } = generateKeyPairSync('ec', { namedCurve: 'prime256v1' });
  return { key: privateKey, pem: privateKey.export({ type: 'pkcs8', format: 'pem' }) as string };
}

/** A positive 128-bit serial number (hex), unique enough that no client sees two certificates with one serial. */
function serial(): string {
  const b = randomBytes(16);
  b[0] = (b[0]! & 0x7f) | 0x10;
  return b.toString('hex');
}

async function atomicWrite(path: string, text: string, mode: number): Promise<void> {
  const tmp = `${path}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`;
  await writeFile(tmp, text, { mode });
  await chmod(tmp, mode);
  await rename(tmp, path);
}
