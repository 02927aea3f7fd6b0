"""Tokens on the client side: the model's chat `template` (render, continue token-in/
token-out) and `counting` (token counts on endpoints, from the most faithful source)."""
