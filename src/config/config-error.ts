/** An invalid configuration. Each problem names the path in the file (or the environment variable) at fault. */
export class ConfigError extends Error {
  readonly problems: readonly string[];
  constructor(source: string, problems: string[]) {
    super(`invalid configuration (${source}):\n${problems.map((problem) => `  - ${problem}`).join("\n")}`);
    this.name = "ConfigError";
    this.problems = problems;
  }
}
