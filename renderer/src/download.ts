// Saving what the core answered as a file (a cassette's .har, a run report, a state archive): the bytes
// are fetched by the page (so a refusal shows as the core's problem, not as a broken download), then
// handed to the browser as a download of a blob URL, released right after.
import { ProblemError } from './api';

/** Starts a download of `blob` named `filename`. */
export function saveBlob(blob: Blob, filename: string): void {
  const url = URL.createObjectURL(blob);
  const a = document.createElement('a');
  a.href = url;
  a.download = filename;
  a.rel = 'noopener';
  a.style.display = 'none';
  document.body.appendChild(a);
  a.click();
  a.remove();
  // The download has taken the URL by the time the click returns; the next task frees it.
  window.setTimeout(() => URL.revokeObjectURL(url), 0);
}

/** The name in a `Content-Disposition: attachment; filename="…"` header, or null. */
export function dispositionName(header: string | null): string | null {
  if (!header) return null;
  const star = /filename\*=UTF-8''([^;]+)/i.exec(header);
  if (star) {
    try {
      return decodeURIComponent(star[1]!.trim());
    } catch {
      // a broken encoding: fall back to the plain name
    }
  }
  const plain = /filename="?([^";]+)"?/i.exec(header);
  return plain ? plain[1]!.trim() : null;
}

/**
 * A Response the page fetched, as a download: an error answer throws the core's problem (ProblemError,
 * shown by ui/kit.tsx's ProblemNotice) instead; the file is named by the answer's Content-Disposition, else `fallback`.
 */
export async function saveResponse(res: Response, fallback: string, what: string): Promise<{ filename: string; bytes: number }> {
  if (!res.ok) {
    const text = await res.text();
    let problem: Record<string, unknown> = {};
    try {
      const parsed: unknown = JSON.parse(text);
      if (parsed && typeof parsed === 'object' && !Array.isArray(parsed)) problem = parsed as Record<string, unknown>;
    } catch {
      // not JSON: the text is the detail
    }
    throw new ProblemError(what, res.status, res.headers, problem, text);
  }
  const blob = await res.blob();
  const filename = dispositionName(res.headers.get('content-disposition')) ?? fallback;
  saveBlob(blob, filename);
  return { filename, bytes: blob.size };
}
