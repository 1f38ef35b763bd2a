from cuda_agent_mcp.cli.app import main

main()
