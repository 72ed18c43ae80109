// The DynamoDB lookup index's items as DynamoDB stores and bills them, for the tests and the
// benchmark that count them: every item of one log (scanned, paged) and its billed size.
import { type AttributeValue, type DynamoDBClient, ScanCommand } from '@aws-sdk/client-dynamodb';

export type Item = Record<string, AttributeValue>;

/** Every item of `log`'s index in `table` (its meta item too when `withMeta`). */
export async function indexItems(
  client: DynamoDBClient,
  table: string,
  log: string,
  withMeta = false,
): Promise<Item[]> {
  const out: Item[] = [];
  let start: Item | undefined;
  do {
    const page = await client.send(
      new ScanCommand({
        TableName: table,
        FilterExpression: 'begins_with(pk, :ns)',
        ExpressionAttributeValues: { ':ns': { S: `idx#${log}#` } },
        ExclusiveStartKey: start,
      }),
    );
    for (const item of page.Items ?? []) if (withMeta || item.pk?.S !== `idx#${log}#meta`) out.push(item);
    start = page.LastEvaluatedKey;
  } while (start);
  return out;
}

/**
 * Bytes DynamoDB bills an item for (storage, and the size a write is rounded up from, 1 KB
 * per write unit): its attribute names and values (a number about one byte per two digits,
 * plus one) and 100 bytes of overhead.
 */
export function billedBytes(item: Item): number {
  let bytes = 100;
  for (const [name, value] of Object.entries(item))
    bytes +=
      Buffer.byteLength(name) +
      (value.S !== undefined ? Buffer.byteLength(value.S) : Math.ceil((value.N ?? '').length / 2) + 1);
  return bytes;
}
