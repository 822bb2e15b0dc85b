"""The contracts the loop, the policy and the tools share: what an agent is (``agent``) and what one tool
call is, how it runs and what it returns (``tools``). Nothing here depends on the packages that use them."""
