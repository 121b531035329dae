// Lists from the API server a page at a time, mapping each item as its page
// arrives, so a cluster with 50,000 pods is never held whole: one unpaginated
// list of that size costs the process over a gigabyte at its peak.

export type Page<T> = { items: T[]; metadata?: { resourceVersion?: string; _continue?: string; continue?: string } };

/**
 * Every item of a paginated list, each passed through `keep` (return undefined
 * to drop it). `list` is called with client-node's names for limit and continue.
 * The resourceVersion is the first page's: the list is one consistent snapshot.
 */
export async function listPages<T, U>(
  list: (page: { limit: number; _continue?: string }) => Promise<Page<T>>,
  keep: (item: T) => U | undefined,
  limit = 500,
): Promise<{ items: U[]; resourceVersion?: string }> {
  const items: U[] = [];
  let cont: string | undefined;
  let resourceVersion: string | undefined;
  do {
    const page = await list({ limit, ...(cont ? { _continue: cont } : {}) });
    for (const it of page.items) {
      const kept = keep(it);
      if (kept !== undefined) items.push(kept);
    }
    resourceVersion ??= page.metadata?.resourceVersion;
    cont = page.metadata?._continue || page.metadata?.continue || undefined;
  } while (cont);
  return { items, ...(resourceVersion !== undefined ? { resourceVersion } : {}) };
}
