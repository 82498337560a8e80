"""Echo agent served by the official Python A2A SDK (a2a-sdk 1.3.0) -- benchmark peer.

The Rust load generator starts this script as a child process with
``python benches/a2a_python_echo.py --port PORT``, waits for the single stdout
line ``listening on http://127.0.0.1:PORT``, drives load against it, then stops
it with SIGTERM. It exists to compare the Rust server against the reference
Python stack: DefaultRequestHandler + InMemoryTaskStore + Starlette routes on
uvicorn (single worker, warning-level logs, no access log).

Every request becomes a task: working status -> artifact "echo" carrying the
user's text parts -> completed status whose agent message repeats the text.

Routes: JSON-RPC (A2A 1.0, ``SendMessage`` / ``SendStreamingMessage``) at
``/``, HTTP+JSON at ``/message:send`` / ``/message:stream`` etc., and the agent
card at ``/.well-known/agent-card.json``.

Setup: python3 -m venv .venv-bench &&
       .venv-bench/bin/pip install 'a2a-sdk[http-server]==1.3.0' uvicorn
"""

import argparse

import uvicorn
from starlette.applications import Starlette

from a2a.helpers import new_task_from_user_message
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import (
    create_agent_card_routes,
    create_jsonrpc_routes,
    create_rest_routes,
)
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types.a2a_pb2 import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    Part,
)

HOST = '127.0.0.1'


class EchoExecutor(AgentExecutor):
    async def execute(self, context: RequestContext, event_queue) -> None:
        if context.current_task is None:  # v2 handler wants the Task first
            await event_queue.enqueue_event(
                new_task_from_user_message(context.message)
            )
        parts = [Part(text=p.text) for p in context.message.parts if p.HasField('text')]
        updater = TaskUpdater(event_queue, context.task_id, context.context_id)
        await updater.start_work()
        await updater.add_artifact(parts, name='echo')
        await updater.complete(updater.new_agent_message(parts))

    async def cancel(self, context: RequestContext, event_queue) -> None:
        await TaskUpdater(event_queue, context.task_id, context.context_id).cancel()


def build_app(port: int) -> Starlette:
    url = f'http://{HOST}:{port}'
    card = AgentCard(
        name='python-echo',
        description='Echoes the user text (a2a-sdk benchmark peer)',
        version='1.0.0',
        supported_interfaces=[
            AgentInterface(url=url, protocol_binding='JSONRPC', protocol_version='1.0'),
            AgentInterface(url=url, protocol_binding='HTTP+JSON', protocol_version='1.0'),
        ],
        capabilities=AgentCapabilities(streaming=True),
        default_input_modes=['text/plain'],
        default_output_modes=['text/plain'],
        skills=[AgentSkill(id='echo', name='echo', description='Echo text', tags=['echo'])],
    )
    handler = DefaultRequestHandler(
        agent_executor=EchoExecutor(), task_store=InMemoryTaskStore(), agent_card=card
    )
    routes = (
        create_agent_card_routes(card)
        + create_jsonrpc_routes(handler, rpc_url='/')
        + create_rest_routes(handler)
    )
    return Starlette(routes=routes)


class Server(uvicorn.Server):
    async def startup(self, sockets=None) -> None:
        await super().startup(sockets)
        if self.started:  # sockets are bound and accepting
            host, port = self.config.host, self.config.port
            print(f'listening on http://{host}:{port}', flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--port', type=int, required=True)
    port = ap.parse_args().port
    Server(uvicorn.Config(  # uvicorn handles SIGTERM/SIGINT
        build_app(port), host=HOST, port=port, workers=1, loop='auto',
        http='auto', log_level='warning', access_log=False,
    )).run()


if __name__ == '__main__':
    main()
