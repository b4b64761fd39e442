/** stdout/stderr of one run, capped (1 MiB by default) with a mark saying how much was dropped. */
export class LogBuffer {
  private parts: string[] = [];
  private size = 0;
  private dropped = 0;

  constructor(private readonly cap = 1024 * 1024) {}

  append(text: string): void {
    if (!text) return;
    const room = this.cap - this.size;
    const bytes = Buffer.byteLength(text, 'utf8');
    if (bytes <= room) {
      this.parts.push(text);
      this.size += bytes;
      return;
    }
    if (room > 0) {
      const cut = Buffer.from(text, 'utf8')
        .subarray(0, room)
        .toString('utf8')
        .replace(/\uFFFD$/, '');
      this.parts.push(cut);
      this.size += Buffer.byteLength(cut, 'utf8');
    }
    this.dropped += bytes - Math.max(0, room);
  }

  /** Output dropped before it reached us (the runner's own cap). */
  addDropped(bytes: number): void {
    this.dropped += bytes;
  }

  get truncated(): boolean {
    return this.dropped > 0;
  }

  text(): string {
    const body = this.parts.join('');
    return this.dropped ? `${body}\n…[logs truncated at ${this.cap} bytes: ${this.dropped} more bytes dropped]\n` : body;
  }
}
