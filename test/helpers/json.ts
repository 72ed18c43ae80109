// JSON that a test parsed from the API or the CLI and then walks into. It is deliberately
// unchecked: a wrong shape fails the test's assertions, which say more than a type error
// would. This is the suite's one opt-out from typing (Biome's noExplicitAny is on).
// biome-ignore lint/suspicious/noExplicitAny: the single, named home of untyped parsed JSON in tests
export type Json = any;
export type JsonObject = Record<string, Json>;
