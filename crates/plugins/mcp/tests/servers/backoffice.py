"""A company's back office as one MCP server with 120 tools, on the official Python SDK.

`cargo xtask bench tokens` runs a task over it in classic and in code mode: a server this
size is where a model that sees every tool's schema on every call pays the most. 24 kinds of
record, each with list, get, create, update and delete; the data is made up and the same on
every run. Run: python3 backoffice.py (MCP on stdio).
"""

import asyncio
import json

import mcp.server.stdio
import mcp_types as types
from mcp.server.lowlevel import Server

CITIES = ["Oslo", "Bergen", "Trondheim", "Stavanger", "Tromsø"]
STATUSES = ["open", "won", "lost"]

# Each kind of record: its plural, what it is, and its fields (name → JSON type, description).
KINDS = [
    ("customers", "companies that buy from us", {
        "name": ("string", "company name"), "city": ("string", "city of the head office"),
        "segment": ("string", "smb, mid or enterprise"), "email": ("string", "billing e-mail")}),
    ("contacts", "people at customers", {
        "name": ("string", "full name"), "customerId": ("integer", "their company"),
        "role": ("string", "job title"), "phone": ("string", "phone number")}),
    ("deals", "sales opportunities", {
        "customerId": ("integer", "the customer"), "amount": ("number", "value in NOK"),
        "status": ("string", "open, won or lost"), "closeDate": ("string", "expected close, YYYY-MM-DD")}),
    ("invoices", "bills sent to customers", {
        "customerId": ("integer", "the customer"), "total": ("number", "amount due in NOK"),
        "dueDate": ("string", "YYYY-MM-DD"), "paid": ("boolean", "whether it is paid")}),
    ("payments", "money received", {
        "invoiceId": ("integer", "the invoice paid"), "amount": ("number", "NOK"),
        "method": ("string", "card, transfer or cash"), "receivedAt": ("string", "YYYY-MM-DD")}),
    ("products", "what we sell", {
        "name": ("string", "product name"), "price": ("number", "list price in NOK"),
        "category": ("string", "product family"), "active": ("boolean", "still sold")}),
    ("orders", "purchases by customers", {
        "customerId": ("integer", "the customer"), "productId": ("integer", "the product"),
        "quantity": ("integer", "units"), "orderedAt": ("string", "YYYY-MM-DD")}),
    ("shipments", "deliveries of orders", {
        "orderId": ("integer", "the order"), "carrier": ("string", "shipping company"),
        "tracking": ("string", "tracking number"), "shippedAt": ("string", "YYYY-MM-DD")}),
    ("suppliers", "companies we buy from", {
        "name": ("string", "company name"), "country": ("string", "country"),
        "rating": ("integer", "1 to 5"), "email": ("string", "orders e-mail")}),
    ("purchase_orders", "what we order from suppliers", {
        "supplierId": ("integer", "the supplier"), "total": ("number", "NOK"),
        "status": ("string", "draft, sent or received"), "expectedAt": ("string", "YYYY-MM-DD")}),
    ("employees", "people who work here", {
        "name": ("string", "full name"), "teamId": ("integer", "their team"),
        "title": ("string", "job title"), "startDate": ("string", "YYYY-MM-DD")}),
    ("teams", "groups of employees", {
        "name": ("string", "team name"), "leadId": ("integer", "the lead employee"),
        "budget": ("number", "yearly budget in NOK"), "location": ("string", "office")}),
    ("projects", "internal projects", {
        "name": ("string", "project name"), "teamId": ("integer", "owning team"),
        "status": ("string", "planned, active or done"), "deadline": ("string", "YYYY-MM-DD")}),
    ("tasks", "work items in projects", {
        "projectId": ("integer", "the project"), "title": ("string", "what to do"),
        "assigneeId": ("integer", "the employee"), "done": ("boolean", "finished")}),
    ("tickets", "support requests from customers", {
        "customerId": ("integer", "the customer"), "subject": ("string", "summary"),
        "priority": ("string", "low, normal or urgent"), "open": ("boolean", "not yet solved")}),
    ("campaigns", "marketing campaigns", {
        "name": ("string", "campaign name"), "channel": ("string", "email, ads or events"),
        "budget": ("number", "NOK"), "startDate": ("string", "YYYY-MM-DD")}),
    ("leads", "possible customers", {
        "company": ("string", "company name"), "campaignId": ("integer", "where they came from"),
        "score": ("integer", "0 to 100"), "city": ("string", "city")}),
    ("subscriptions", "recurring plans of customers", {
        "customerId": ("integer", "the customer"), "plan": ("string", "basic, pro or suite"),
        "monthly": ("number", "NOK per month"), "renewsAt": ("string", "YYYY-MM-DD")}),
    ("refunds", "money paid back", {
        "paymentId": ("integer", "the payment"), "amount": ("number", "NOK"),
        "reason": ("string", "why"), "approved": ("boolean", "approved by finance")}),
    ("warehouses", "where stock is kept", {
        "name": ("string", "warehouse name"), "city": ("string", "city"),
        "capacity": ("integer", "pallets"), "managerId": ("integer", "the employee")}),
    ("stock_items", "products in warehouses", {
        "productId": ("integer", "the product"), "warehouseId": ("integer", "the warehouse"),
        "quantity": ("integer", "units on hand"), "reorderAt": ("integer", "reorder level")}),
    ("contracts", "signed agreements with customers", {
        "customerId": ("integer", "the customer"), "value": ("number", "NOK"),
        "signedAt": ("string", "YYYY-MM-DD"), "endsAt": ("string", "YYYY-MM-DD")}),
    ("expenses", "costs employees claim", {
        "employeeId": ("integer", "who paid"), "amount": ("number", "NOK"),
        "category": ("string", "travel, meals or equipment"), "approved": ("boolean", "approved")}),
    ("meetings", "meetings with customers", {
        "customerId": ("integer", "the customer"), "employeeId": ("integer", "who met them"),
        "date": ("string", "YYYY-MM-DD"), "notes": ("string", "what was said")}),
]

COUNTS = {"customers": 200, "deals": 400}


def value(kind, field, kind_type, n):
    """A made-up, repeatable value for one field of record n."""
    if field == "city":
        return CITIES[n % len(CITIES)]
    if field == "status" and kind == "deals":
        return STATUSES[(n * 7) % 3]
    if field == "customerId":
        return (n * 13) % COUNTS["customers"] + 1
    if field == "amount" and kind == "deals":
        return (n * 2377) % 40000 + 500
    if field == "name" and kind == "customers":
        return f"Customer {n}"
    if kind_type == "string":
        if field.endswith(("Date", "At", "date", "deadline")):
            return f"2026-{n % 12 + 1:02d}-{n % 28 + 1:02d}"
        return f"{field} {n}"
    if kind_type == "integer":
        return (n * 31) % 97 + 1
    if kind_type == "number":
        return float((n * 977) % 20000 + 100)
    return n % 2 == 0


def records(kind, fields):
    count = COUNTS.get(kind, 50)
    return [
        {"id": n, **{field: value(kind, field, spec[0], n) for field, spec in fields.items()}}
        for n in range(1, count + 1)
    ]


DATA = {kind: records(kind, fields) for kind, _, fields in KINDS}


def properties(fields, optional=False):
    return {
        field: {"type": kind_type, "description": description}
        for field, (kind_type, description) in fields.items()
    }


def record_schema(fields):
    return {
        "type": "object",
        "properties": {"id": {"type": "integer"}, **properties(fields)},
        "required": ["id", *fields],
    }


def tools():
    listed = []
    for kind, what, fields in KINDS:
        singular = kind[:-1] if kind.endswith("s") else kind
        id_schema = {"id": {"type": "integer", "description": f"the {singular}'s id"}}
        listed += [
            types.Tool(
                name=f"{kind}_list",
                description=f"List {kind} ({what}). Every field is an optional filter that must match exactly.",
                input_schema={"type": "object", "properties": properties(fields)},
                output_schema={
                    "type": "object",
                    "properties": {"items": {"type": "array", "items": record_schema(fields)}},
                    "required": ["items"],
                },
                annotations=types.ToolAnnotations(read_only_hint=True),
            ),
            types.Tool(
                name=f"{kind}_get",
                description=f"One of the {kind} ({what}) by id.",
                input_schema={"type": "object", "properties": id_schema, "required": ["id"]},
                output_schema=record_schema(fields),
                annotations=types.ToolAnnotations(read_only_hint=True),
            ),
            types.Tool(
                name=f"{kind}_create",
                description=f"Create one of the {kind} ({what}); answers with the new record.",
                input_schema={"type": "object", "properties": properties(fields), "required": list(fields)},
                output_schema=record_schema(fields),
            ),
            types.Tool(
                name=f"{kind}_update",
                description=f"Change fields of one of the {kind} ({what}); answers with the record.",
                input_schema={"type": "object", "properties": {**id_schema, **properties(fields)}, "required": ["id"]},
                output_schema=record_schema(fields),
            ),
            types.Tool(
                name=f"{kind}_delete",
                description=f"Delete one of the {kind} ({what}) for good.",
                input_schema={"type": "object", "properties": id_schema, "required": ["id"]},
                annotations=types.ToolAnnotations(destructive_hint=True),
            ),
        ]
    return listed


TOOLS = tools()


def result(value):
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=json.dumps(value))],
        structured_content=value,
    )


def failure(message):
    return types.CallToolResult(content=[types.TextContent(type="text", text=message)], is_error=True)


async def list_tools(ctx, params):
    return types.ListToolsResult(tools=TOOLS)


async def call_tool(ctx, params):
    kind, _, operation = params.name.rpartition("_")
    arguments = params.arguments or {}
    if kind not in DATA:
        return failure(f"unknown tool {params.name}")
    rows = DATA[kind]
    if operation == "list":
        items = [row for row in rows if all(row.get(key) == wanted for key, wanted in arguments.items())]
        return result({"items": items})
    found = next((row for row in rows if row["id"] == arguments.get("id")), None)
    if operation == "create":
        row = {"id": len(rows) + 1, **arguments}
        rows.append(row)
        return result(row)
    if found is None:
        return failure(f"no {kind} with id {arguments.get('id')}")
    if operation == "get":
        return result(found)
    if operation == "update":
        found.update(arguments)
        return result(found)
    rows.remove(found)
    return types.CallToolResult(content=[types.TextContent(type="text", text="deleted")])


async def main():
    server = Server("backoffice", on_list_tools=list_tools, on_call_tool=call_tool)
    async with mcp.server.stdio.stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


if __name__ == "__main__":
    asyncio.run(main())
