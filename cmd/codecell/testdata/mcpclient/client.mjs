// Drives codecell's MCP server with the official TypeScript SDK and prints
// what it got as one JSON object; cmd/codecell/mcp_test.go checks it.
//
//   node client.mjs stdio CODECELL_BINARY [ARGS...]
//   node client.mjs http URL [API_KEY]
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

const [mode, target, ...rest] = process.argv.slice(2);
let transport;
if (mode === 'stdio') {
  transport = new StdioClientTransport({ command: target, args: ['mcp', ...rest], stderr: 'inherit' });
} else {
  const headers = rest[0] ? { Authorization: `Bearer ${rest[0]}` } : {};
  transport = new StreamableHTTPClientTransport(new URL(target), { requestInit: { headers } });
}
const client = new Client({ name: 'codecell-test', version: '1.0.0' });
await client.connect(transport);

const call = (name, args) => client.callTool({ name, arguments: args });
const out = {};
out.tools = (await client.listTools()).tools.map((t) => ({ name: t.name, hasSchema: !!t.inputSchema?.properties, description: t.description }));
out.write = await call('write_file', { path: '/tmp/sales.csv', content: 'region,amount\nnorth,10\nsouth,32\nnorth,5\n' });
out.analysis = await call('execute_code', {
  language: 'python', session_id: 'ts',
  code: "import pandas as pd\ndf = pd.read_csv('/tmp/sales.csv')\ndf.groupby('region').amount.sum()",
});
out.chart = await call('execute_code', {
  language: 'python', session_id: 'ts',
  code: "import matplotlib.pyplot as plt\ndf.groupby('region').amount.sum().plot.bar()\nplt.savefig('chart.png')\nplt.show()",
});
out.error = await call('execute_code', { language: 'python', code: '1/0' });
out.read = await call('read_file', { path: '/home/user/chart.png' });
out.list = await call('list_files', { path: '/home/user' });
out.info = await call('sandbox_info', {});
await client.close();
console.log(JSON.stringify(out));
