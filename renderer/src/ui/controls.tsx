// Form pieces the pages share: a labelled field, copy and confirm buttons, a value shown once.
import { useId, useState, type ReactNode } from 'react';
type FieldProps = { id: string; 'aria-describedby'?: string; 'aria-invalid'?: boolean };

/** A labelled form field: the label names the control; hint and error describe it. */
export function Field({
  label,
  hint,
  error,
  className,
  children,
}: {
  label: string;
  hint?: ReactNode;
  error?: string | null;
  className?: string;
  children: (props: FieldProps) => ReactNode;
}) {
  const id = useId();
  const described = [hint ? `${id}-hint` : null, error ? `${id}-error` : null].filter(Boolean).join(' ');
  return (
    <div className={`op-field ${className ?? ''}`}>
      <label htmlFor={id}>{label}</label>
      {children({ id, ...(described ? { 'aria-describedby': described } : {}), ...(error ? { 'aria-invalid': true } : {}) })}
      {error && (
        <span className="op-error" id={`${id}-error`}>
          {error}
        </span>
      )}
      {hint && (
        <span className="op-hint" id={`${id}-hint`}>
          {hint}
        </span>
      )}
    </div>
  );
}

/** Copies `text` to the clipboard (falling back to a selection copy where the Clipboard API is refused). */
export function CopyButton({ text, label = 'Copy', testid }: { text: string; label?: string; testid?: string }) {
  const [state, setState] = useState<'idle' | 'copied' | 'failed'>('idle');
  async function copy() {
    let ok: boolean;
    try {
      await navigator.clipboard.writeText(text);
      ok = true;
    } catch {
      const area = document.createElement('textarea');
      area.value = text;
      area.setAttribute('readonly', '');
      area.style.position = 'fixed';
      area.style.opacity = '0';
      document.body.appendChild(area);
      area.select();
      try {
        ok = document.execCommand('copy');
      } catch {
        ok = false;
      }
      area.remove();
    }
    setState(ok ? 'copied' : 'failed');
    window.setTimeout(() => setState('idle'), 2000);
  }
  return (
    <button type="button" className="op-btn op-small" onClick={() => void copy()} data-testid={testid} aria-live="polite">
      {state === 'copied' ? 'Copied ✓' : state === 'failed' ? 'Select and copy it' : label}
    </button>
  );
}

/** A destructive button that asks first, inline: "Delete X? [Delete] [Cancel]". */
export function ConfirmButton({
  label,
  question,
  confirmLabel = label,
  onConfirm,
  testid,
  small = true,
}: {
  label: string;
  question: string;
  confirmLabel?: string;
  onConfirm: () => Promise<void>;
  testid?: string;
  small?: boolean;
}) {
  const [asking, setAsking] = useState(false);
  const [busy, setBusy] = useState(false);
  const size = small ? ' op-small' : '';
  if (!asking)
    return (
      <button type="button" className={`op-btn op-danger${size}`} data-testid={testid} onClick={() => setAsking(true)}>
        {label}
      </button>
    );
  return (
    <span className="op-confirm" role="group" aria-label={question}>
      <span>{question}</span>
      <button
        type="button"
        className={`op-btn op-danger op-solid${size}`}
        data-testid={testid ? `${testid}-confirm` : undefined}
        disabled={busy}
        autoFocus
        onClick={() => {
          setBusy(true);
          // Each caller's onConfirm catches and shows its own failure; the button only leaves its busy state.
          void onConfirm().finally(() => {
            setBusy(false);
            setAsking(false);
          });
        }}
      >
        {confirmLabel}
      </button>
      <button type="button" className={`op-btn${size}`} onClick={() => setAsking(false)} disabled={busy}>
        Cancel
      </button>
    </span>
  );
}

/** A secret shown this once, with a copy button and the warning that it will not be shown again. */
export function OnceBox({ title, value, onDismiss, testid }: { title: string; value: string; onDismiss: () => void; testid?: string }) {
  return (
    <div className="op-once" role="status" data-testid={testid ? `${testid}-box` : undefined}>
      <p>
        <strong>{title}</strong> — shown this once: only its hash is kept, so copy it now. Lost keys cannot be recovered; issue a new one.
      </p>
      <div className="op-copyline">
        <code data-testid={testid}>{value}</code>
        <CopyButton text={value} testid={testid ? `${testid}-copy` : undefined} />
        <button type="button" className="op-btn op-small" onClick={onDismiss}>
          I have copied it
        </button>
      </div>
    </div>
  );
}
