// Values that are there at once on a warm cache and promised otherwise: the read path stays
// synchronous (no promise, no microtask) when everything it needs is in memory.

/** A value, or its promise when it had to be loaded (the hot paths stay synchronous on a warm cache). */
export type Maybe<T> = T | Promise<T>;

/** The values of `parts`, synchronously unless one of them is still a promise. */
export function all<T extends readonly unknown[]>(...parts: { readonly [K in keyof T]: Maybe<T[K]> }): Maybe<T> {
  return parts.some((p) => p instanceof Promise)
    ? (Promise.all(parts) as Promise<unknown> as Promise<T>)
    : (parts as unknown as T);
}

/** `f` of the value, synchronously if it is already there. */
export function andThen<T, U>(value: Maybe<T>, f: (v: T) => Maybe<U>): Maybe<U> {
  return value instanceof Promise ? value.then(f) : f(value);
}
