// A tiny MCP server of our own over stdio (the official SDK's Server), for
// tests/e2e/mcp_openrpc.sh: it offers tools.listChanged, and its tool
// add_tool adds a tool extra_N (inputSchema {n: integer}) and sends
// notifications/tools/list_changed before it answers.
//   MANY_TOOLS=N: N more tools bulk_0..bulk_{N-1} at start, each with a
//   400-byte description (a tool list over the bridge's 64 KiB cap).
//   PAGE_SIZE=N: tools/list answers N tools a page, with nextCursor (the
//   page's start, as text) while more follow.
//   ENDLESS=1 (with PAGE_SIZE): every page has a nextCursor, the pages past
//   the list each one tool page_K more (a server that never ends its list).
//   NODE_PATH=tests/mcp/node_modules node mcp_tools_server.cjs
const { Server } = require("@modelcontextprotocol/sdk/server/index.js");
const { StdioServerTransport } = require("@modelcontextprotocol/sdk/server/stdio.js");
const { ListToolsRequestSchema, CallToolRequestSchema } = require("@modelcontextprotocol/sdk/types.js");

const tools = [
    { name: "add_tool", description: "adds a tool extra_N and says the list changed",
      inputSchema: { type: "object", properties: {} } },
    { name: "hello", description: "says hello",
      inputSchema: { type: "object", properties: { who: { type: "string" } }, required: ["who"] } },
];
for (let i = 0; i < Number(process.env.MANY_TOOLS || 0); i++)
    tools.push({ name: `bulk_${i}`, description: "d".repeat(400),
                 inputSchema: { type: "object", properties: { x: { type: "number" } } } });
let extra = 0;
const server = new Server({ name: "jrpc-tools-test", version: "1.0.0" },
                          { capabilities: { tools: { listChanged: true } } });
const pageSize = Number(process.env.PAGE_SIZE || 0);
server.setRequestHandler(ListToolsRequestSchema, async (req) => {
    if (!pageSize)
        return { tools };
    const at = Number((req.params && req.params.cursor) || 0);
    if (at >= tools.length)   // ENDLESS: past the list, a new tool a page
        return { tools: [{ name: `page_${at}`, inputSchema: { type: "object" } }],
                 nextCursor: String(at + 1) };
    const page = { tools: tools.slice(at, at + pageSize) };
    if (at + pageSize < tools.length || process.env.ENDLESS)
        page.nextCursor = String(at + pageSize);
    return page;
});
server.setRequestHandler(CallToolRequestSchema, async (req) => {
    if (req.params.name === "add_tool") {
        const name = `extra_${extra++}`;
        tools.push({ name, description: "added at run time",
                     inputSchema: { type: "object", properties: { n: { type: "integer" } } } });
        await server.sendToolListChanged();
        return { content: [{ type: "text", text: name }] };
    }
    if (req.params.name === "hello")
        return { content: [{ type: "text", text: `hello ${req.params.arguments.who}` }] };
    return { content: [{ type: "text", text: "no such tool" }], isError: true };
});
server.connect(new StdioServerTransport());
