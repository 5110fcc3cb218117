import { type FileHandle, mkdir, open, readdir, readFile, unlink } from "node:fs/promises";
import { join } from "node:path";
import type { AuditOutbox, AuditOutboxItem } from "../storage/audit-outbox-interfaces.js";

/** A segment's file name: its number, fixed width, so that names sort as segments were made. */
const SEGMENT = /^(\d{12})\.ndjson$/;

interface Segment {
  number: number;
  /** Its entries in file order; a removed one is undefined. */
  records: (string | undefined)[];
  remaining: number;
}

/**
 * The audit outbox of the embedded engine with in-memory stores: a journal in the analytics data directory
 * (docs/audit-log.md#what-survives-what). Entries are appended to the current segment file as JSON lines and the file
 * is fsync'd before append() resolves; the pump reads them, and a segment whose entries the engine all has is deleted.
 * Reading seals the current segment (the next append starts a new file), so a segment only ever shrinks to nothing
 * once it is read. At start-up every segment left is read back, and the pump moves it into the engine: a crash
 * after the engine took an entry and before its segment was deleted writes the entry again, which the reads count
 * once. A line cut short by a crash during its append (never acknowledged, so never answered) is skipped.
 */
export class AuditJournal implements AuditOutbox {
  private readonly directory: string;
  private readonly segments: Segment[];
  private nextNumber: number;
  /** The segment appends go to, and its open file; none until the first append after a read. */
  private current: { segment: Segment; file: FileHandle } | undefined;
  /** Appends and seals, one at a time. */
  private queue: Promise<unknown> = Promise.resolve();

  private constructor(directory: string, segments: Segment[]) {
    this.directory = directory;
    this.segments = segments;
    this.nextNumber = (segments.at(-1)?.number ?? 0) + 1;
  }

  /** Opens the journal in `directory` (made if missing) with the entries every earlier process left there. */
  static async open(directory: string): Promise<AuditJournal> {
    await mkdir(directory, { recursive: true });
    const names = (await readdir(directory)).filter((name) => SEGMENT.test(name)).sort();
    const segments: Segment[] = [];
    for (const name of names) {
      const records = (await readFile(join(directory, name), "utf8")).split("\n").filter(isWholeRecord);
      const number = Number((SEGMENT.exec(name) as RegExpExecArray)[1]);
      if (records.length === 0) await unlink(join(directory, name));
      else segments.push({ number, records, remaining: records.length });
    }
    return new AuditJournal(directory, segments);
  }

  append(records: readonly string[]): Promise<void> {
    return this.serially(async () => {
      if (records.length === 0) return;
      const current = this.current ?? (await this.startSegment());
      await current.file.write(`${records.join("\n")}\n`);
      await current.file.datasync();
      current.segment.records.push(...records);
      current.segment.remaining += records.length;
    });
  }

  async peek(max: number): Promise<AuditOutboxItem[]> {
    // The current segment is sealed before it is read, so no append can land in a segment being emptied.
    await this.serially(() => this.seal());
    const items: AuditOutboxItem[] = [];
    for (const segment of this.segments) {
      for (let index = 0; index < segment.records.length && items.length < max; index++) {
        const record = segment.records[index];
        if (record !== undefined) items.push({ handle: `${segment.number}:${index}`, record });
      }
      if (items.length >= max) break;
    }
    return items;
  }

  async remove(handles: readonly string[]): Promise<void> {
    for (const handle of handles) {
      const [number, index] = handle.split(":").map(Number) as [number, number];
      const segment = this.segments.find((each) => each.number === number);
      if (!segment || segment.records[index] === undefined) continue;
      segment.records[index] = undefined;
      segment.remaining--;
    }
    for (const segment of this.segments.filter((each) => each.remaining === 0 && each !== this.current?.segment)) {
      await unlink(this.path(segment.number));
      this.segments.splice(this.segments.indexOf(segment), 1);
    }
  }

  describe(): string {
    return `entries are journaled in ${this.directory} (fsync'd before a write is answered) until the engine has them`;
  }

  /** Closes the current segment's file; what it holds stays for the next start. */
  close(): Promise<void> {
    return this.serially(() => this.seal());
  }

  private async startSegment(): Promise<{ segment: Segment; file: FileHandle }> {
    const segment: Segment = { number: this.nextNumber++, records: [], remaining: 0 };
    const file = await open(this.path(segment.number), "a");
    // The new file's name must survive a crash too: the directory is synced once per segment.
    const directory = await open(this.directory, "r");
    try {
      await directory.sync();
    } finally {
      await directory.close();
    }
    this.segments.push(segment);
    this.current = { segment, file };
    return this.current;
  }

  private async seal(): Promise<void> {
    const current = this.current;
    if (!current) return;
    this.current = undefined;
    await current.file.close();
  }

  private serially<T>(work: () => Promise<T>): Promise<T> {
    const done = this.queue.then(work);
    this.queue = done.catch(() => {});
    return done;
  }

  private path(number: number): string {
    return join(this.directory, `${String(number).padStart(12, "0")}.ndjson`);
  }
}

/** A line that is a whole JSON value: not the empty tail, nor a line a crash cut short. */
function isWholeRecord(line: string): boolean {
  if (line === "") return false;
  try {
    JSON.parse(line);
    return true;
  } catch {
    return false;
  }
}
