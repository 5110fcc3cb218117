/**
 * Where a request can carry a credential: a header (the whole value, or what follows a scheme such as `Bearer`),
 * or a query parameter. The same shape as a gateway route's key source.
 */
export type SecretLocation = { kind: "header"; header: string; scheme?: string } | { kind: "query"; parameter: string };

/** What a secret value is replaced with. */
export const REDACTED = "[redacted]";

/** Headers that carry keygate's own credentials (root keys, the default gateway key location) whatever the routes say. */
const ALWAYS_SECRET_HEADERS = ["authorization", "proxy-authorization", "x-api-key"];
const ALWAYS_SECRET_SCHEMES = ["bearer"];

/** One character of a JSON string's text: anything but a quote or backslash, or an escape pair. */
const JSON_CHAR = String.raw`(?:[^"\\]|\\.)`;

/**
 * `?name=value` or `&name=value` in any string of the line. The value runs to the next `&` (as URLSearchParams
 * splits, so a `#` or `?` in it stays part of it), whitespace or the end of the JSON string.
 */
const QUERY_PARAMETER = /([?&])((?:[^=&?\s"\\]|\\.)+)=((?:[^&\s"\\]|\\.)*)/g;

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}

/**
 * Removes credentials from finished log lines (pino's JSON, one line at a time), wherever in the line they are:
 * request URLs, messages, error messages and stacks, nested fields. Values are replaced, names kept, so a line
 * still says that a key was sent and where. It replaces:
 * - the value of a query parameter that is a key location (`?api_key=[redacted]`), its name compared after
 *   percent-decoding as the gateway decodes it, and ignoring case;
 * - the value of a key-carrying header written as a JSON field (`"x-api-key":"[redacted]"`) or as a header line
 *   (`x-api-key: [redacted]`);
 * - the credential after an authentication scheme (`Bearer [redacted]`, and each scheme a route names).
 * The line stays valid JSON: only characters inside JSON strings are replaced. Bytes logged as numbers (a Buffer)
 * are not looked into; never log raw request bytes.
 */
export class LogRedaction {
  private readonly headers = new Set(ALWAYS_SECRET_HEADERS);
  private readonly schemes = new Set(ALWAYS_SECRET_SCHEMES);
  /** Lowercase names. */
  private readonly parameters = new Set<string>();
  private headerField = /$^/g;
  private headerLine = /$^/g;
  private schemeValue = /$^/g;

  constructor(locations: Iterable<SecretLocation> = []) {
    this.compile();
    this.learn(locations);
  }

  /**
   * Adds key locations (a route table's, after a reload). Locations are never forgotten: a line about a request
   * can be written after a reload removed the route that read its key.
   */
  learn(locations: Iterable<SecretLocation>): void {
    let changed = false;
    const add = (set: Set<string>, name: string) => {
      const lower = name.toLowerCase();
      if (set.has(lower)) return;
      set.add(lower);
      changed = true;
    };
    for (const location of locations) {
      if (location.kind === "query") add(this.parameters, location.parameter);
      else {
        add(this.headers, location.header);
        if (location.scheme !== undefined) add(this.schemes, location.scheme);
      }
    }
    if (changed) this.compile();
  }

  /** `line` without credentials (see the class comment). */
  redact(line: string): string {
    // Most lines hold no key location at all: looking for the names in the lowercased line spares them the
    // patterns. A parameter name may also be written encoded (%, +, or a JSON escape).
    const lower = line.toLowerCase();
    let result = line;
    if (this.parameters.size > 0 && (someIn(lower, this.parameters) || /[%+\\]/.test(lower))) {
      result = result.replace(QUERY_PARAMETER, (match, separator: string, name: string) =>
        this.parameters.has(decodeParameterName(name).toLowerCase()) ? `${separator}${name}=${REDACTED}` : match,
      );
    }
    if (someIn(lower, this.headers)) {
      result = result
        .replace(this.headerField, (_match, name: string) => `"${name}":"${REDACTED}"`)
        .replace(this.headerLine, (_match, before: string, name: string) => `${before}${name}: ${REDACTED}`);
    }
    if (someIn(lower, this.schemes)) result = result.replace(this.schemeValue, (_match, scheme: string) => `${scheme} ${REDACTED}`);
    return result;
  }

  private compile(): void {
    const headers = [...this.headers].map(escapeRegExp).join("|");
    const schemes = [...this.schemes].map(escapeRegExp).join("|");
    const jsonString = `"${JSON_CHAR}*"`;
    // "name": "value" or "name": ["value", ...]
    this.headerField = new RegExp(String.raw`"(${headers})"\s*:\s*(?:${jsonString}|\[\s*(?:${jsonString}\s*,?\s*)*\])`, "gi");
    // name: value at the start of a string or line, up to the end of the line (an escaped CR or LF) or of the
    // string. Not after a colon: `err:unkey:authorization:…` is an error code, not a header.
    this.headerLine = new RegExp(String.raw`(^|["\s]|\\[rn])(${headers}):[ \t]*(?:[^"\\]|\\[^rn])+`, "gi");
    // Bearer <credential>: up to whitespace or the end of the JSON string
    this.schemeValue = new RegExp(String.raw`(?<![\w-])(${schemes})(?:[ \t]|\\t)+(?:[^\s"\\]|\\.)+`, "gi");
  }
}

function someIn(text: string, names: ReadonlySet<string>): boolean {
  for (const name of names) if (text.includes(name)) return true;
  return false;
}

/** A query parameter's name as URLSearchParams reads it (percent-decoded, `+` as space), from its JSON text. */
function decodeParameterName(jsonText: string): string {
  if (!/[%+\\]/.test(jsonText)) return jsonText;
  let text = jsonText;
  if (text.includes("\\")) {
    try {
      text = JSON.parse(`"${text}"`) as string;
    } catch {
      // Not a whole JSON escape sequence: compare the text as it is.
    }
  }
  const [first] = new URLSearchParams(`${text}=`).keys();
  return first ?? text;
}
