"""What crosses a JSON-RPC wire: line framing (every stdio server, the web's body parser) and the SDK
protocol's request and result models, shared by the SDK client and the SDK server."""
