from __future__ import annotations

import lbnorm


def test_all_is_sorted_and_complete() -> None:
    assert lbnorm.__all__ == sorted(lbnorm.__all__)
    public = {name for name in vars(lbnorm) if not name.startswith("_")}
    modules = {
        name for name in public if type(getattr(lbnorm, name)).__name__ == "module"
    }
    assert set(lbnorm.__all__) == public - modules - {"annotations"}


def test_errors_share_a_base_and_exit_codes() -> None:
    codes = {
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
