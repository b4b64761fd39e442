// Zod builds each object schema's fast parser with `new Function` unless told not to, and probes for it
// when the schema is made: under the GUI's CSP (no 'unsafe-eval', renderer/index.html) that probe is a
// script-src violation on every page. The contract's schemas are imported for their operations (the typed
// client, api.ts), so this runs first, before any of them is built: main.tsx imports it before anything else.
import { z } from 'zod';

z.config({ jitless: true });
