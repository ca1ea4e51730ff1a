"""The compiler: Trace -> Trace stages, then code. Differentiation and its rule tables
(grad_rules/), planning on the market, passes, code generation, checked calls and the
autograd.Function a differentiated program runs in; pipeline.py runs them in order.
"""
