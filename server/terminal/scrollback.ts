/**
 * A terminal's scrollback: the last `max` characters of its output (about as many bytes for the usual
 * ASCII-heavy terminal text), replayed to every reader that connects. Appends are cheap; the text is
 * cut back to `max` only when it has grown a quarter past it.
 */
export class Scrollback {
  private text = '';
  private cut = false;

  constructor(readonly max: number) {}

  push(data: string): void {
    this.text += data;
    if (this.text.length > this.max + (this.max >> 2)) {
      this.text = trimFront(this.text, this.max);
      this.cut = true;
    }
  }

  /** What a new reader sees: at most `max` characters, starting on a line where one is near. */
  read(): string {
    return this.text.length > this.max ? trimFront(this.text, this.max) : this.text;
  }

  /** True once output has been dropped from the front. */
  get truncated(): boolean {
    return this.cut || this.text.length > this.max;
  }
}

/**
 * The last `max` characters of `text`, advanced to just after a newline within the first 4 Ki characters
 * (so the replay does not start in the middle of a line or an escape sequence), and never starting on
 * the second half of a surrogate pair.
 */
function trimFront(text: string, max: number): string {
  let start = text.length - max;
  const nl = text.indexOf('\n', start);
  if (nl >= 0 && nl - start < 4096) start = nl + 1;
  else if (/[\uDC00-\uDFFF]/.test(text.charAt(start))) start += 1;
  return text.slice(start);
}
