import { createReadStream } from "node:fs";
import { createInterface } from "node:readline";
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
}

/** What went wrong with the file: the CLI prints it and exits 1. */
export class ImportFileError extends Error {}

const validateKey = new Ajv({ allErrors: true, useDefaults: true, allowUnionTypes: true, strict: false }).compile<MigrateKeyInput>(
  MigratedKey,
);
/** Problems listed at most before the import is refused (a file of the wrong shape would list every line). */
const PROBLEMS_SHOWN = 20;

/**
 * `keygate keys migrate`: a JSON-lines file of keys (each line one key as keys.migrateKeys takes it) imported in
 * batches through the same KeyMigrationService as the API. Every line is read and checked before the first key is
 * stored. stdout gets one JSON line per key (`{ line, hash, keyId }` or `{ line, hash, failed: "exists" }`), stderr
 * the progress and the summary.
 */
export async function importKeys(services: Services, job: KeyImport, progress: NodeJS.WriteStream = process.stderr): Promise<void> {
  const { keys, lines } = await readKeyFile(job.path);
  if (keys.length === 0) throw new ImportFileError(`${job.path} holds no keys`);
  const caller = services.rootKeys.operator(job.workspaceId);
  let migrated = 0;
  let failed = 0;
  const show = (final: boolean) => {
    const text = `imported ${migrated + failed} of ${keys.length} keys: ${migrated} migrated, ${failed} failed`;
    if (progress.isTTY) progress.write(`\r${text}${final ? "\n" : ""}`);
    else progress.write(`${text}\n`);
  };
  for (let start = 0; start < keys.length; start += job.batchSize) {
    const batch = keys.slice(start, start + job.batchSize);
    let result: Awaited<ReturnType<Services["keyMigrations"]["migrateKeys"]>>;
    try {
      result = await services.keyMigrations.migrateKeys(caller, { migrationId: job.migrationId, apiId: job.apiId, keys: batch });
    } catch (error) {
      if (progress.isTTY && start > 0) progress.write("\n");
      throw explainBatchFailure(error, lines, start, migrated + failed);
    }
    // Each hash is either migrated or failed; the lines are matched in order, so a hash given twice is reported twice.
    const keyIds = new Map<string, string[]>();
    for (const { hash, keyId } of result.migrated) keyIds.set(hash, [...(keyIds.get(hash) ?? []), keyId]);
    batch.forEach((key, index) => {
      const line = lines[start + index];
      const keyId = keyIds.get(key.hash)?.shift();
      if (keyId !== undefined) {
        migrated++;
        process.stdout.write(`${JSON.stringify({ line, hash: key.hash, keyId })}\n`);
      } else {
        failed++;
        process.stdout.write(`${JSON.stringify({ line, hash: key.hash, failed: "exists" })}\n`);
      }
    });
    show(start + job.batchSize >= keys.length);
  }
  progress.write(
    `Migrated ${migrated} key${migrated === 1 ? "" : "s"} into ${job.apiId} under migration '${job.migrationId}'` +
      (failed > 0 ? `; ${failed} failed because a key already holds its hash (listed with "failed" on stdout).\n` : ".\n"),
  );
}

/** Every key of the file with the line it is on; blank lines are skipped. Refuses the file at its first problems. */
async function readKeyFile(path: string): Promise<{ keys: MigrateKeyInput[]; lines: number[] }> {
  const keys: MigrateKeyInput[] = [];
  const lines: number[] = [];
  const problems: string[] = [];
  let number = 0;
  const reader = createInterface({ input: createReadStream(path, "utf8"), crlfDelay: Number.POSITIVE_INFINITY });
  try {
    for await (const text of reader) {
      number++;
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
      keys.push(value);
      lines.push(number);
    }
  } catch (error) {
    throw new ImportFileError(`cannot read ${path}: ${(error as Error).message}`);
  }
  if (problems.length > 0) {
    const more = problems.length > PROBLEMS_SHOWN ? `\n  … and ${problems.length - PROBLEMS_SHOWN} more` : "";
    throw new ImportFileError(
      `${path}: nothing was imported, the file has problems:\n  ${problems.slice(0, PROBLEMS_SHOWN).join("\n  ")}${more}`,
    );
  }
  return { keys, lines };
}

/** A refused batch, told in lines of the file; what earlier batches stored stays (a rerun reports those as failed). */
function explainBatchFailure(error: unknown, lines: readonly number[], start: number, done: number): Error {
  if (!isKeygateError(error)) return error as Error;
  const where = (error.errors ?? []).map((issue) => {
    const location = issue.location.replace(/^body\.keys\[(\d+)\]\.?/, (_match, index: string) => `line ${lines[start + Number(index)]}: `);
    return `${location} ${issue.message}`;
  });
  const stored = done > 0 ? ` The ${done} keys of earlier batches were stored; running the import again reports them as failed.` : "";
  return new ImportFileError(`${error.detail}${where.length > 0 ? `\n  ${where.join("\n  ")}` : ""}${stored}`);
}
