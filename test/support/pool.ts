/** Runs `fn` over `items` with at most `concurrency` calls in flight, in order of start. */
export async function pool<T>(items: readonly T[], concurrency: number, fn: (item: T) => Promise<unknown>): Promise<void> {
  let i = 0;
  await Promise.all(Array.from({ length: concurrency }, async () => {
    while (i < items.length) await fn(items[i++]!);
  }));
}
