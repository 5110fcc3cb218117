/** One scrape of GET /metrics, parsed: each sample by name and labels. */
export interface Scrape {
  text: string;
  /** The sample with exactly these labels (0 when absent). */
  value(name: string, labels?: Record<string, string>): number;
}

export function parseScrape(text: string): Scrape {
  const samples = new Map<string, number>();
  for (const line of text.split("\n")) {
    if (line === "" || line.startsWith("#")) continue;
    const match = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{.*\})? (\S+)$/.exec(line);
    if (!match) throw new Error(`not a Prometheus sample line: ${line}`);
    samples.set(`${match[1]}${match[2] ?? ""}`, Number(match[3]));
  }
  return {
    text,
    value(name, labels = {}) {
      const rendered = Object.entries(labels)
        .sort(([a], [b]) => (a < b ? -1 : 1))
        .map(([label, value]) => `${label}="${value}"`)
        .join(",");
      for (const [key, value] of samples) {
        const open = key.indexOf("{");
        const sampleName = open < 0 ? key : key.slice(0, open);
        if (sampleName !== name) continue;
        const sampleLabels =
          open < 0
            ? ""
            : key
                .slice(open + 1, -1)
                .split(/,(?=[a-zA-Z_]+=")/)
                .sort()
                .join(",");
        if (sampleLabels === rendered) return value;
      }
      return 0;
    },
  };
}
