/**
 * A URL without its password (Redis, ClickHouse), for messages and logs. A user name without a password is masked too: it may
 * be a password written in the wrong place (`redis://secret@host`).
 */
export function redactUrl(url: string): string {
  try {
    const parsed = new URL(url);
    if (parsed.password) parsed.password = "***";
    else if (parsed.username) parsed.username = "***";
    return parsed.toString();
  } catch {
    return "(unparseable url)";
  }
}
