import t from "tap";
import { CLI_ENTRY, run } from "../helpers/process.js";

// Help and usage errors: answered from the arguments alone, so these runs have no configuration and no Redis.

t.test("keygate without a command prints the usage to stderr and exits 2", async (t) => {
  const bare = await run(CLI_ENTRY, [], {});
  t.equal(bare.code, 2, "a usage error, not success");
  t.equal(bare.stdout, "");
  t.match(bare.stderr, /give a command/);
  t.match(bare.stderr, /usage: keygate <command>/);
  t.match(bare.stderr, /ratelimit-namespace delete/);
});

t.test("--help, -h and help print the usage of the level they are given at, exit 0, and need no Redis", async (t) => {
  const cases: [string[], RegExp, RegExp | undefined][] = [
    [["--help"], /^usage: keygate <command>/, undefined],
    [["-h"], /^usage: keygate <command>/, undefined],
    [["help"], /^usage: keygate <command>/, undefined],
    [["root-key", "--help"], /^usage: keygate root-key <command>/, /ratelimit-namespace/],
    [["root-key", "-h"], /^usage: keygate root-key <command>/, /ratelimit-namespace/],
    [["root-key", "help"], /^usage: keygate root-key <command>/, /ratelimit-namespace/],
    [["help", "root-key"], /^usage: keygate root-key <command>/, /ratelimit-namespace/],
    [["ratelimit-namespace", "--help"], /^usage: keygate ratelimit-namespace <command>/, /root-key create/],
    [["root-key", "create", "--help"], /^usage: keygate root-key create --workspace <ws> --permission <p>/, /root-key list/],
    [["root-key", "list", "-h"], /^usage: keygate root-key list \[--workspace <ws>\] \[--json\]/, /root-key create/],
    [["root-key", "revoke", "--help"], /^usage: keygate root-key revoke <id>/, /root-key list/],
    [
      ["help", "ratelimit-namespace", "delete"],
      /^usage: keygate ratelimit-namespace delete <name or rlns_ id> --workspace <ws>/,
      /root-key/,
    ],
    [["ratelimit-namespace", "delete", "--workspace", "ws_a", "-h"], /^usage: keygate ratelimit-namespace delete/, /root-key/],
  ];
  for (const [args, expected, notExpected] of cases) {
    const result = await run(CLI_ENTRY, args, {});
    t.equal(result.code, 0, `keygate ${args.join(" ")} exits 0`);
    t.match(result.stdout, expected, `keygate ${args.join(" ")} prints its usage`);
    if (notExpected) t.notMatch(result.stdout, notExpected, "and only that level's");
    t.equal(result.stderr, "");
  }
});

t.test("a wrong command or option is exit 2 with the relevant usage, before any Redis is needed", async (t) => {
  const missing = await run(CLI_ENTRY, ["root-key"], {});
  t.equal(missing.code, 2);
  t.match(missing.stderr, /give a root-key command: create, list, revoke/);
  t.match(missing.stderr, /usage: keygate root-key <command>/);
  const unknown = await run(CLI_ENTRY, ["root-key", "rotate"], {});
  t.equal(unknown.code, 2);
  t.match(unknown.stderr, /unknown command 'root-key rotate'/);
  t.match(unknown.stderr, /usage: keygate root-key <command>/);
  const badOption = await run(CLI_ENTRY, ["root-key", "list", "--colour"], {});
  t.equal(badOption.code, 2);
  t.match(badOption.stderr, /Unknown option '--colour'/);
  t.match(badOption.stderr, /usage: keygate root-key list/);
  t.notMatch(badOption.stderr, /need a Redis store/, "the argument is what is wrong, not the storage");
});
