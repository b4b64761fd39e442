/**
 * TypeScript types for the GUI, generated from the OpenAPI document's component schemas (the same zod
 * schemas the routes validate with): the renderer may import nothing from the core but these
 * (DESIGN.md), so this is how it shares the core's shapes instead of copying them. Written to
 * renderer/src/api-types.ts by `npm run openapi`; a test fails when the file and the code disagree.
 *
 * It covers the JSON Schema the document uses: objects (properties, required, additionalProperties),
 * arrays, enums, `type` lists with null, oneOf/anyOf and $ref.
 */
type Schema = {
  $ref?: string;
  type?: string | string[];
  enum?: unknown[];
  const?: unknown;
  properties?: Record<string, Schema>;
  required?: string[];
  additionalProperties?: boolean | Schema;
  items?: Schema;
  oneOf?: Schema[];
  anyOf?: Schema[];
  allOf?: Schema[];
  description?: string;
};

const SCALAR: Record<string, string> = { string: 'string', integer: 'number', number: 'number', boolean: 'boolean', null: 'null' };

function typeOf(s: Schema, indent: string): string {
  if (s.$ref) return s.$ref.replace('#/components/schemas/', '');
  if (s.enum) return s.enum.map((v) => JSON.stringify(v)).join(' | ');
  if (s.const !== undefined) return JSON.stringify(s.const);
  const union = s.oneOf ?? s.anyOf;
  if (union) return union.map((u) => typeOf(u, indent)).join(' | ');
  if (s.allOf) return s.allOf.map((u) => typeOf(u, indent)).join(' & ');
  const types = s.type === undefined ? [] : Array.isArray(s.type) ? s.type : [s.type];
  if (types.length === 0) return 'unknown';
  return types.map((t) => typeFor(t, s, indent)).join(' | ');
}

function typeFor(t: string, s: Schema, indent: string): string {
  if (t === 'array') return `Array<${s.items ? typeOf(s.items, indent) : 'unknown'}>`;
  if (t !== 'object') return SCALAR[t] ?? 'unknown';
  const props = Object.entries(s.properties ?? {});
  const extra = s.additionalProperties;
  if (props.length === 0) return `Record<string, ${extra && typeof extra === 'object' ? typeOf(extra, indent) : 'unknown'}>`;
  const inner = `${indent}  `;
  const required = new Set(s.required ?? []);
  const lines = props.map(([name, p]) => {
    const doc = p.description ? `${inner}/** ${p.description.replace(/\*\//g, '*\\/').replace(/\s*\n\s*/g, ' ')} */\n` : '';
    const key = /^[A-Za-z_$][\w$]*$/.test(name) ? name : JSON.stringify(name);
    return `${doc}${inner}${key}${required.has(name) ? '' : '?'}: ${typeOf(p, inner)};`;
  });
  if (extra && typeof extra === 'object') lines.push(`${inner}[key: string]: unknown;`);
  return `{\n${lines.join('\n')}\n${indent}}`;
}

export function clientTypes(document: { components?: { schemas?: Record<string, Schema> } }): string {
  const schemas = Object.entries(document.components?.schemas ?? {}).sort(([a], [b]) => a.localeCompare(b));
  const body = schemas.map(([name, s]) => `${s.description ? `/** ${s.description.replace(/\s*\n\s*/g, ' ')} */\n` : ''}export type ${name} = ${typeOf(s, '')};`);
  return [
    '// Generated from docs/openapi.json by `npm run openapi` (server/api/client-types.ts). Do not edit.',
    '// The shapes the core answers with, for the GUI (which may import nothing else from the core).',
    '',
    ...body.flatMap((b) => [b, '']),
  ].join('\n');
}
