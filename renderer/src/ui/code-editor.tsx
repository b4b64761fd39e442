// A read-only code view on CodeMirror 6: line numbers, syntax highlighting (TypeScript/JavaScript,
// Python), keyboard focusable, selectable. One editor per file shown; rebuilt when the file changes.
// Its colours are the shell's custom properties (styles.css: --code-*), so it follows light and dark.
import { useEffect, useRef } from 'react';
import { EditorState, type Extension } from '@codemirror/state';
import { EditorView, highlightActiveLine, highlightActiveLineGutter, lineNumbers } from '@codemirror/view';
import { HighlightStyle, syntaxHighlighting } from '@codemirror/language';
import { tags as t } from '@lezer/highlight';
import { javascript } from '@codemirror/lang-javascript';
import { python } from '@codemirror/lang-python';

function languageOf(path: string): Extension {
  if (/\.py$/i.test(path)) return python();
  if (/\.[cm]?[jt]sx?$/i.test(path)) return javascript({ typescript: /\.[cm]?tsx?$/i.test(path), jsx: /x$/i.test(path) });
  return [];
}

const theme = EditorView.theme({
  '&': { fontSize: '13px', border: '1px solid var(--line)', borderRadius: '6px', background: 'var(--card)', color: 'var(--fg)' },
  '.cm-scroller': { fontFamily: 'var(--mono)', maxHeight: '560px', overflow: 'auto' },
  '.cm-content': { caretColor: 'var(--fg)' },
  '.cm-gutters': { background: 'var(--bg)', color: 'var(--muted)', borderRight: '1px solid var(--line)' },
  '.cm-activeLine': { background: 'var(--code-active-line)' },
  '.cm-activeLineGutter': { background: 'var(--hover)', color: 'var(--fg)' },
  '&.cm-focused .cm-selectionBackground, .cm-selectionBackground, ::selection': { background: 'var(--code-selection)' },
  '&.cm-focused': { outline: '2px solid var(--focus)', outlineOffset: '2px' },
});

/** Syntax colours by meaning, each a custom property set for both schemes. */
const highlight = HighlightStyle.define([
  {
    tag: [t.keyword, t.controlKeyword, t.moduleKeyword, t.operatorKeyword, t.definitionKeyword, t.modifier, t.self],
    color: 'var(--code-keyword)',
  },
  { tag: [t.string, t.special(t.string), t.regexp, t.escape, t.character], color: 'var(--code-string)' },
  { tag: [t.number, t.bool, t.null, t.atom], color: 'var(--code-number)' },
  { tag: [t.comment, t.lineComment, t.blockComment, t.docComment], color: 'var(--code-comment)', fontStyle: 'italic' },
  {
    tag: [t.function(t.variableName), t.function(t.propertyName), t.function(t.definition(t.variableName))],
    color: 'var(--code-function)',
  },
  { tag: [t.typeName, t.className, t.namespace, t.standard(t.variableName)], color: 'var(--code-type)' },
  { tag: [t.propertyName, t.definition(t.propertyName)], color: 'var(--code-property)' },
  { tag: [t.meta, t.annotation, t.processingInstruction], color: 'var(--code-meta)' },
  { tag: t.invalid, color: 'var(--bad)' },
  { tag: t.strong, fontWeight: 'bold' },
  { tag: t.emphasis, fontStyle: 'italic' },
  { tag: t.link, textDecoration: 'underline' },
]);

export function ReadOnlyCode({ path, content, label, testid }: { path: string; content: string; label: string; testid?: string }) {
  const host = useRef<HTMLDivElement>(null);
  const view = useRef<EditorView | null>(null);
  // The view is built once per file (its language and label); new content of the same file (a save making
  // a new version) replaces the document in place, which is much cheaper than building the view again.
  useEffect(() => {
    if (!host.current) return;
    const built = new EditorView({
      parent: host.current,
      state: EditorState.create({
        doc: content,
        extensions: [
          lineNumbers(),
          highlightActiveLineGutter(),
          highlightActiveLine(),
          syntaxHighlighting(highlight),
          languageOf(path),
          EditorState.readOnly.of(true),
          EditorView.editable.of(false),
          EditorView.contentAttributes.of({ 'aria-label': label, tabindex: '0' }),
          theme,
        ],
      }),
    });
    view.current = built;
    return () => {
      built.destroy();
      view.current = null;
    };
    // Built for a file: content changes are applied by the effect below.
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [path, label]);
  useEffect(() => {
    const v = view.current;
    if (v && v.state.doc.toString() !== content) v.dispatch({ changes: { from: 0, to: v.state.doc.length, insert: content } });
  }, [content]);
  return <div ref={host} data-testid={testid} />;
}
