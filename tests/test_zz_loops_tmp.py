import torch, pytest
import adapters

def test_linear_grad_and_seed():
    torch.manual_seed(3)
    lin = adapters.get_linear_cls()(4, 3)
    w = lin.weight
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(3)
        lin2 = adapters.get_linear_cls()(4, 3)
    assert torch.equal(lin2.weight.detach(), w.detach())
    x = torch.randn(2, 4, generator=torch.Generator().manual_seed(0)).requires_grad_()
    up = torch.randn(2, 3, generator=torch.Generator().manual_seed(1))
    out = lin(x)
    (out * up).sum().backward()
    assert x.grad is not None
    torch.testing.assert_close(x.grad, up @ w.detach())
    assert w.grad is not None
    torch.testing.assert_close(w.grad, up.T @ x.detach())
    params = dict(lin.named_parameters())
    assert params["weight"] is w

def test_set_seed():
    adapters.run_set_seed(5)
    a = torch.rand(3)
    adapters.run_set_seed(5)
    b = torch.rand(3)
    assert torch.equal(a, b)
