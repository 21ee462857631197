"""An SD3.5-Medium-like VAE decoder: 16-channel 64x64 latent to a 512x512 image
through GroupNorm(32) + SiLU + conv residual blocks and nearest upsampling,
bf16, random weights. GroupNorm dominates its eager time."""
import torch
import torch.nn as nn
import torch.nn.functional as F

from _timing import run


class ResBlock(nn.Module):
    def __init__(self, cin, cout):
        super().__init__()
        self.n1, self.c1 = nn.GroupNorm(32, cin), nn.Conv2d(cin, cout, 3, padding=1)
        self.n2, self.c2 = nn.GroupNorm(32, cout), nn.Conv2d(cout, cout, 3, padding=1)
        self.skip = nn.Conv2d(cin, cout, 1) if cin != cout else nn.Identity()

    def forward(self, x):
        h = self.c1(F.silu(self.n1(x)))
        h = self.c2(F.silu(self.n2(h)))
        return self.skip(x) + h


class Decoder(nn.Module):
    def __init__(self, latent=16, chans=(512, 512, 256, 128)):
        super().__init__()
        self.conv_in = nn.Conv2d(latent, chans[0], 3, padding=1)
        self.mid = nn.Sequential(ResBlock(chans[0], chans[0]), ResBlock(chans[0], chans[0]))
        ups, c = [], chans[0]
        for i, co in enumerate(chans):
            ups.append(nn.Sequential(ResBlock(c, co), ResBlock(co, co)))
            c = co
        self.ups = nn.ModuleList(ups)
        self.norm_out = nn.GroupNorm(32, c)
        self.conv_out = nn.Conv2d(c, 3, 3, padding=1)

    def forward(self, z):
        h = self.mid(self.conv_in(z))
        for i, up in enumerate(self.ups):
            h = up(h)
            if i < len(self.ups) - 1:
                h = F.interpolate(h, scale_factor=2.0, mode="nearest")
        return self.conv_out(F.silu(self.norm_out(h)))


model = Decoder().cuda().to(torch.bfloat16).eval()
z = torch.randn(1, 16, 64, 64, device="cuda", dtype=torch.bfloat16)
run("vae decoder 512x512 bf16", lambda: model(z))
