"""The machine line every benchmark prints: the Zen generation from family and model."""

from experiments.machine import amd_core, cpu_model


def test_zen_generation_from_family_and_model():
    assert amd_core(25, 0x01) == "Zen 3"  # Milan
    assert amd_core(25, 0x21) == "Zen 3"  # Vermeer
    assert amd_core(25, 0x11) == "Zen 4"  # Genoa
    assert amd_core(25, 0x61) == "Zen 4"  # Raphael
    assert amd_core(26, 0x02) == "Zen 5"
    assert amd_core(23, 0x01) == "Zen"  # Naples
    assert amd_core(23, 0x31) == "Zen 2"  # Rome
    assert amd_core(23, -1) == "Zen/Zen 2"  # no model line
    assert amd_core(6, 0x55) == ""


def test_cpu_model_names_the_cores():
    assert "cores" in cpu_model()
