#!/usr/bin/env node
// Draws the app's icons (no image tools needed): a rounded square with a prompt chevron and a cursor
// bar. Writes resources/icon.png (512 px; electron-builder derives .icns/.ico from it), resources/tray.png
// (+ @2x) and the macOS menu-bar template resources/trayTemplate.png (+ @2x, black on transparent).
//   node scripts/icons.mjs
import { writeFileSync } from 'node:fs';
import { deflateSync } from 'node:zlib';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const OUT = fileURLToPath(new URL('../resources/', import.meta.url));

const CRC_TABLE = Array.from({ length: 256 }, (_, n) => {
  let c = n;
  for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
  return c >>> 0;
});
const crc32 = (buf) => {
  let c = 0xffffffff;
  for (const b of buf) c = CRC_TABLE[(c ^ b) & 0xff] ^ (c >>> 8);
  return (c ^ 0xffffffff) >>> 0;
};
function chunk(type, data) {
  const len = Buffer.alloc(4);
  len.writeUInt32BE(data.length);
  const body = Buffer.concat([Buffer.from(type, 'ascii'), data]);
  const crc = Buffer.alloc(4);
  crc.writeUInt32BE(crc32(body));
  return Buffer.concat([len, body, crc]);
}
function png(size, pixel) {
  const raw = Buffer.alloc(size * (size * 4 + 1));
  for (let y = 0; y < size; y++) {
    raw[y * (size * 4 + 1)] = 0;
    for (let x = 0; x < size; x++) {
      const [r, g, b, a] = pixel((x + 0.5) / size, (y + 0.5) / size, 1 / size);
      raw.set([r, g, b, a], y * (size * 4 + 1) + 1 + x * 4);
    }
  }
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(size, 0);
  ihdr.writeUInt32BE(size, 4);
  ihdr.set([8, 6, 0, 0, 0], 8);
  return Buffer.concat([
    Buffer.from([137, 80, 78, 71, 13, 10, 26, 10]),
    chunk('IHDR', ihdr),
    chunk('IDAT', deflateSync(raw, { level: 9 })),
    chunk('IEND', Buffer.alloc(0)),
  ]);
}

// Signed distances in unit coordinates (0..1), anti-aliased over one pixel.
const roundedSquare = (x, y, half, r) => {
  const qx = Math.abs(x - 0.5) - half + r;
  const qy = Math.abs(y - 0.5) - half + r;
  return Math.hypot(Math.max(qx, 0), Math.max(qy, 0)) + Math.min(Math.max(qx, qy), 0) - r;
};
const segment = (x, y, ax, ay, bx, by) => {
  const t = Math.max(0, Math.min(1, ((x - ax) * (bx - ax) + (y - ay) * (by - ay)) / ((bx - ax) ** 2 + (by - ay) ** 2)));
  return Math.hypot(x - ax - t * (bx - ax), y - ay - t * (by - ay));
};
const coverage = (d, px) => Math.max(0, Math.min(1, 0.5 - d / px));
/** The glyph: a chevron `>` and a cursor bar `_`, as a distance field. */
const glyph = (x, y, w) =>
  Math.min(segment(x, y, 0.3, 0.3, 0.5, 0.5) - w, segment(x, y, 0.5, 0.5, 0.3, 0.7) - w, segment(x, y, 0.56, 0.68, 0.72, 0.68) - w);

const BRAND = [37, 99, 235];
const icon = (x, y, px) => {
  const inside = coverage(roundedSquare(x, y, 0.44, 0.1), px);
  const mark = coverage(glyph(x, y, 0.045), px);
  const rgb = BRAND.map((c) => Math.round(c + (255 - c) * mark));
  return [...rgb, Math.round(255 * inside)];
};
const template = (x, y, px) => [0, 0, 0, Math.round(255 * coverage(glyph(x, y, 0.07), px))];

const write = (name, buf) => writeFileSync(join(OUT, name), buf);
write('icon.png', png(512, icon));
write('tray.png', png(16, icon));
write('tray@2x.png', png(32, icon));
write('trayTemplate.png', png(16, template));
write('trayTemplate@2x.png', png(32, template));
process.stdout.write(`icons written to ${OUT}\n`);
