/** The `search` filter of list procedures: a case-insensitive substring match; no search keeps everything. */
export function containsIgnoringCase(text: string, search: string | undefined): boolean {
  return search === undefined || text.toLowerCase().includes(search.toLowerCase());
}
