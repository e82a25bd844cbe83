from __future__ import annotations

import pytest

import lbnorm


def test_all_is_sorted_and_every_name_loads() -> None:
    assert lbnorm.__all__ == sorted(lbnorm.__all__)
    for name in lbnorm.__all__:
        assert getattr(lbnorm, name).__name__ == name
    assert set(lbnorm.__all__) <= set(dir(lbnorm))
    assert lbnorm.__version__


def test_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        _ = lbnorm.nope


def test_errors_share_a_base_and_exit_codes() -> None:
    codes = {
        lbnorm.OptionsError: 2,
        lbnorm.SuiteError: 3,
        lbnorm.InputError: 4,
        lbnorm.SchemaMismatchError: 4,
        lbnorm.ValidationError: 5,
        lbnorm.OutputError: 6,
    }
    for error, code in codes.items():
        assert issubclass(error, lbnorm.LbnormError)
        assert error.exit_code == code
    assert issubclass(lbnorm.SuiteError, ValueError)
    assert issubclass(lbnorm.OutputError, OSError)
