import { createReadStream } from "node:fs";
import { readFile, rename, rm, stat, writeFile } from "node:fs/promises";
import { Ajv } from "ajv";
import type { MigrateKeyInput } from "../domain/keys/key-migrations.js";
import { isKeygateError } from "../errors/keygate-error.js";
import { toValidationIssues } from "../http/validation-issues.js";
import { MigratedKey } from "../routes/v2/keys/migrate-keys.js";
import type { Services } from "../services.js";

export interface KeyImport {
  workspaceId: string;
  apiId: string;
  migrationId: string;
  path: string;
  batchSize: number;
  /** Where the position after each batch is kept while the import runs (removed once it is done). */
  positionPath: string;
  /** Go on from the position an interrupted import left, rather than from the start. */
  resume: boolean;
}

/** What went wrong with the file: the CLI prints it and exits 1. */
export class ImportFileError extends Error {}

/**
 * How far an import got: the byte offset and line after the last batch stored, what it had counted, and the file
 * it was reading (a changed file cannot be resumed).
 */
interface ImportPosition {
  offset: number;
  line: number;
  migrated: number;
  failed: number;
  fileSize: number;
  fileModifiedMs: number;
}

/** One line of the file: its number, its text (without the line break) and the byte offset just after it. */
interface FileLine {
  number: number;
  text: string;
  end: number;
}

const validateKey = new Ajv({ allErrors: true, useDefaults: true, allowUnionTypes: true, strict: false }).compile<MigrateKeyInput>(
  MigratedKey,
);
/** Problems listed at most before the import is refused (a file of the wrong shape would list every line). */
const PROBLEMS_SHOWN = 20;
const NEWLINE = 0x0a;

/**
 * `keygate keys migrate`: a JSON-lines file of keys (each line one key as keys.migrateKeys takes it) imported in
 * batches through the same KeyMigrationService as the API. The file is streamed, twice: every line is read and
 * checked before the first key is stored, then read again and stored batch by batch, so a file of millions of keys
 * takes the memory of one batch. After each batch the position is written to `positionPath`; an interrupted import
 * goes on from there with `resume`. stdout gets one JSON line per key (`{ line, hash, keyId }` or
 * `{ line, hash, failed: "exists" }`), stderr the progress and the summary.
 */
export async function importKeys(services: Services, job: KeyImport, progress: NodeJS.WriteStream = process.stderr): Promise<void> {
  const file = await stat(job.path).catch((error: Error) =>
    Promise.reject(new ImportFileError(`cannot read ${job.path}: ${error.message}`)),
  );
  const from = await startingPosition(job, file);
  const remaining = await checkKeyFile(job.path, from);
  if (remaining === 0 && from.offset === 0) throw new ImportFileError(`${job.path} holds no keys`);
  const caller = services.rootKeys.operator(job.workspaceId);
  let { migrated, failed } = from;
  const total = migrated + failed + remaining;
  const startedAt = Date.now();
  const done = () => migrated + failed - from.migrated - from.failed;
  const show = (final: boolean) => {
    const seconds = (Date.now() - startedAt) / 1_000;
    const rate = seconds > 0 ? `, ${Math.round(done() / seconds)} keys/s` : "";
    const text = `imported ${migrated + failed} of ${total} keys: ${migrated} migrated, ${failed} failed${rate}`;
    if (progress.isTTY) progress.write(`\r${text}${final ? "\n" : ""}`);
    else progress.write(`${text}\n`);
  };
  if (from.offset > 0) progress.write(`Resuming at line ${from.line + 1} (${migrated + failed} keys imported before).\n`);

  let batch: { key: MigrateKeyInput; line: number }[] = [];
  const store = async (end: FileLine) => {
    let result: Awaited<ReturnType<Services["keyMigrations"]["migrateKeys"]>>;
    try {
      result = await services.keyMigrations.migrateKeys(caller, {
        migrationId: job.migrationId,
        apiId: job.apiId,
        keys: batch.map(({ key }) => key),
      });
    } catch (error) {
      if (progress.isTTY && done() > 0) progress.write("\n");
      throw explainBatchFailure(error, batch, migrated + failed, job.positionPath);
    }
    // Each hash is either migrated or failed; the lines are matched in order, so a hash given twice is reported twice.
    const keyIds = new Map<string, string[]>();
    for (const { hash, keyId } of result.migrated) keyIds.set(hash, [...(keyIds.get(hash) ?? []), keyId]);
    for (const { key, line } of batch) {
      const keyId = keyIds.get(key.hash)?.shift();
      if (keyId !== undefined) {
        migrated++;
        process.stdout.write(`${JSON.stringify({ line, hash: key.hash, keyId })}\n`);
      } else {
        failed++;
        process.stdout.write(`${JSON.stringify({ line, hash: key.hash, failed: "exists" })}\n`);
      }
    }
    batch = [];
    await savePosition(job.positionPath, {
      offset: end.end,
      line: end.number,
      migrated,
      failed,
      fileSize: file.size,
      fileModifiedMs: file.mtimeMs,
    });
    show(migrated + failed === total);
  };
  let last: FileLine | undefined;
  for await (const line of linesOf(job.path, from)) {
    last = line;
    if (line.text.trim() === "") continue;
    batch.push({ key: parsedKey(line.text), line: line.number });
    if (batch.length === job.batchSize) await store(line);
  }
  if (batch.length > 0 && last) await store(last);
  await rm(job.positionPath, { force: true });
  progress.write(
    `Migrated ${migrated} key${migrated === 1 ? "" : "s"} into ${job.apiId} under migration '${job.migrationId}'` +
      (failed > 0 ? `; ${failed} failed because a key already holds its hash (listed with "failed" on stdout).\n` : ".\n"),
  );
}

/** Where this import starts: the beginning, or with `resume` the position an interrupted run left. */
async function startingPosition(job: KeyImport, file: { size: number; mtimeMs: number }): Promise<ImportPosition> {
  const saved = await readFile(job.positionPath, "utf8").then(
    (text) => JSON.parse(text) as ImportPosition,
    (error: NodeJS.ErrnoException) => (error.code === "ENOENT" ? undefined : Promise.reject(error)),
  );
  if (!job.resume) {
    if (saved) {
      throw new ImportFileError(
        `an interrupted import of this file left ${job.positionPath} (after line ${saved.line}): add --resume to go on from there, or delete it to start over`,
      );
    }
    return { offset: 0, line: 0, migrated: 0, failed: 0, fileSize: file.size, fileModifiedMs: file.mtimeMs };
  }
  if (!saved) throw new ImportFileError(`there is no interrupted import to resume: ${job.positionPath} does not exist`);
  if (saved.fileSize !== file.size || saved.fileModifiedMs !== file.mtimeMs) {
    throw new ImportFileError(
      `${job.path} changed since the import was interrupted: it cannot be resumed (delete ${job.positionPath} to start over)`,
    );
  }
  return saved;
}

async function savePosition(path: string, position: ImportPosition): Promise<void> {
  // Written aside and renamed: an import killed while writing leaves the previous position whole.
  const aside = `${path}.tmp`;
  await writeFile(aside, `${JSON.stringify(position)}\n`);
  await rename(aside, path);
}

/**
 * Reads the file from `from` and checks every line; returns how many keys it holds. Refuses the file at its first
 * problems, listing them by line, before anything is stored.
 */
async function checkKeyFile(path: string, from: ImportPosition): Promise<number> {
  const problems: string[] = [];
  let keys = 0;
  for await (const { text, number } of linesOf(path, from)) {
    if (text.trim() === "") continue;
    let value: unknown;
    try {
      value = JSON.parse(text);
    } catch {
      problems.push(`line ${number}: is not JSON`);
      continue;
    }
    if (!validateKey(value)) {
      for (const issue of toValidationIssues(validateKey.errors ?? [], `line ${number}`))
        problems.push(`${issue.location}: ${issue.message}`);
      continue;
    }
    keys++;
  }
  if (problems.length > 0) {
    const more = problems.length > PROBLEMS_SHOWN ? `\n  … and ${problems.length - PROBLEMS_SHOWN} more` : "";
    throw new ImportFileError(
      `${path}: nothing was imported, the file has problems:\n  ${problems.slice(0, PROBLEMS_SHOWN).join("\n  ")}${more}`,
    );
  }
  return keys;
}

/** A line checkKeyFile accepted, as the key it is (defaults filled in). */
function parsedKey(text: string): MigrateKeyInput {
  const value: unknown = JSON.parse(text);
  if (!validateKey(value)) throw new ImportFileError("the file changed while it was imported");
  return value;
}

/** The lines of a file from a position on, streamed, with the byte offset after each (line breaks \n or \r\n). */
async function* linesOf(path: string, from: { offset: number; line: number }): AsyncGenerator<FileLine> {
  let number = from.line;
  let base = from.offset;
  let pending: Buffer = Buffer.alloc(0);
  try {
    for await (const chunk of createReadStream(path, { start: from.offset })) {
      let buffer = pending.length === 0 ? (chunk as Buffer) : Buffer.concat([pending, chunk as Buffer]);
      let at = buffer.indexOf(NEWLINE);
      while (at !== -1) {
        const text = buffer.toString("utf8", 0, at > 0 && buffer[at - 1] === 0x0d ? at - 1 : at);
        base += at + 1;
        yield { number: ++number, text, end: base };
        buffer = buffer.subarray(at + 1);
        at = buffer.indexOf(NEWLINE);
      }
      pending = buffer;
    }
  } catch (error) {
    throw new ImportFileError(`cannot read ${path}: ${(error as Error).message}`);
  }
  if (pending.length > 0) yield { number: ++number, text: pending.toString("utf8"), end: base + pending.length };
}

/** A refused batch, told in lines of the file; what earlier batches stored stays. */
function explainBatchFailure(error: unknown, batch: readonly { line: number }[], done: number, positionPath: string): Error {
  if (!isKeygateError(error)) return error as Error;
  const where = (error.errors ?? []).map((issue) => {
    const location = issue.location.replace(/^body\.keys\[(\d+)\]\.?/, (_match, index: string) => `line ${batch[Number(index)]?.line}: `);
    return `${location} ${issue.message}`;
  });
  const stored =
    done > 0
      ? ` The ${done} keys of earlier batches were stored: fix the file, delete ${positionPath} and run the import again (it reports them as failed).`
      : "";
  return new ImportFileError(`${error.detail}${where.length > 0 ? `\n  ${where.join("\n  ")}` : ""}${stored}`);
}
