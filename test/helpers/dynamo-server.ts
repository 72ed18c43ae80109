// A real DynamoDB-protocol server on loopback for tests and benchmarks: dynalite (npm),
// in memory. The helper creates Stele's single table (pk/sk strings, on demand), as the
// CDK stack does.
import type { Server } from 'node:http';
import { createRequire } from 'node:module';
import { CreateTableCommand, DynamoDBClient } from '@aws-sdk/client-dynamodb';

type Dynalite = (options: Record<string, unknown>) => Server;
const dynalite = createRequire(import.meta.url)('dynalite') as Dynalite;

export interface DynamoServer {
  readonly endpoint: string;
  readonly table: string;
  readonly region: string;
  readonly credentials: { accessKeyId: string; secretAccessKey: string };
  /** Creates another table of the same shape. */
  createTable(name: string): Promise<void>;
  close(): Promise<void>;
}

export async function startDynamoServer(table = 'stele'): Promise<DynamoServer> {
  const server = dynalite({ createTableMs: 0, deleteTableMs: 0, updateTableMs: 0 });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const { port } = server.address() as { port: number };
  const endpoint = `http://127.0.0.1:${port}`;
  const credentials = { accessKeyId: 'local', secretAccessKey: 'local' };
  const region = 'us-east-1';
  const client = new DynamoDBClient({ endpoint, region, credentials });
  const createTable = async (name: string) => {
    await client.send(
      new CreateTableCommand({
        TableName: name,
        BillingMode: 'PAY_PER_REQUEST',
        AttributeDefinitions: [
          { AttributeName: 'pk', AttributeType: 'S' },
          { AttributeName: 'sk', AttributeType: 'S' },
        ],
        KeySchema: [
          { AttributeName: 'pk', KeyType: 'HASH' },
          { AttributeName: 'sk', KeyType: 'RANGE' },
        ],
      }),
    );
  };
  await createTable(table);
  return {
    endpoint,
    table,
    region,
    credentials,
    createTable,
    async close() {
      client.destroy();
      server.closeAllConnections?.();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
