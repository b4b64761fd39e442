/**
 * Caps what the workspace watcher tracks, so a snippets/ folder with a million entries costs a bounded
 * number of watches: at most `maxFolders` folders under snippets/ (and as many other entries there, counted
 * apart, so junk files never crowd out a snippet folder) and `maxEntries` paths inside each folder.
 * Paths are relative to snippets/, '/'-separated. A path over the cap is ignored by the watcher; the loader
 * (./folder.ts) reports the folder as holding too many entries, and `overflowed` says when folders were left out.
 */
export class WatchBudget {
  private readonly folders = new Map<string, Set<string>>();
  /** Files, FIFOs, symlinks… directly under snippets/: watched so the loader can say they are no folder. */
  private readonly others = new Set<string>();
  private foldersFull = false;

  constructor(private readonly limits: { maxFolders: number; maxEntries: number }) {}

  /**
   * Whether the watcher may track `rel`; admits it (counts it) when it is new and there is room. `kind` is
   * what the watcher's stats say of an entry directly under snippets/. chokidar asks without stats too, but
   * always with them before it watches an entry: a top-level entry of unknown kind is let through uncounted
   * while either count has room, and counted when its stats come.
   */
  admit(rel: string, kind?: 'dir' | 'other'): boolean {
    const [folder, ...rest] = rel.split('/');
    if (!folder) return true;
    if (rest.length === 0 && kind === undefined) {
      return this.folders.has(folder) || this.others.has(folder) || Math.min(this.folders.size, this.others.size) < this.limits.maxFolders;
    }
    if (rest.length === 0 && kind === 'other' && !this.folders.has(folder)) {
      if (this.others.has(folder)) return true;
      if (this.others.size >= this.limits.maxFolders) {
        this.foldersFull = true;
        return false;
      }
      this.others.add(folder);
      return true;
    }
    let paths = this.folders.get(folder);
    if (!paths) {
      if (this.folders.size >= this.limits.maxFolders) {
        this.foldersFull = true;
        return false;
      }
      paths = new Set();
      this.folders.set(folder, paths);
    }
    if (rest.length === 0) return true;
    const key = rest.join('/');
    if (paths.has(key)) return true;
    if (paths.size >= this.limits.maxEntries) return false;
    paths.add(key);
    return true;
  }

  /** A path (and, for a folder, everything under it) is gone: its room is free again. */
  release(rel: string): void {
    const [folder, ...rest] = rel.split('/');
    if (!folder) return;
    if (rest.length === 0) {
      this.folders.delete(folder);
      this.others.delete(folder);
      return;
    }
    const paths = this.folders.get(folder);
    if (!paths) return;
    const key = rest.join('/');
    paths.delete(key);
    for (const p of paths) if (p.startsWith(`${key}/`)) paths.delete(p);
  }

  /** A new watcher starts counting from nothing. */
  clear(): void {
    this.folders.clear();
    this.others.clear();
    this.foldersFull = false;
  }

  /** True once a folder under snippets/ was left unwatched for lack of room. */
  get overflowed(): boolean {
    return this.foldersFull;
  }
}
