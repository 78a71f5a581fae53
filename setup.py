"""Python packaging for Tessera.

The extension tessera._C is built by CMake, in the same ./build directory that `make` uses, so
the C++ core compiles once whichever way the build starts. Works with
    pip install --no-build-isolation -e .     (editable: _C stays in torch_backend/tessera/)
    pip install --no-build-isolation .        (regular wheel: _C is copied into it)
"""

import os
import re
import shutil
import subprocess
import sys

from setuptools import Extension, find_packages, setup
from setuptools.command.build_ext import build_ext

ROOT = os.path.dirname(os.path.abspath(__file__))
# The Makefile passes its BUILD_DIR here so pip and make never configure two build trees.
CMAKE_BUILD_DIR = os.path.join(ROOT, os.environ.get("TESSERA_BUILD_DIR", "build"))
PACKAGE_DIR = os.path.join(ROOT, "torch_backend", "tessera")


def project_version():
    """The single source of the version is project(... VERSION x.y.z) in CMakeLists.txt."""
    with open(os.path.join(ROOT, "CMakeLists.txt")) as f:
        match = re.search(r"project\(\s*tessera\s+VERSION\s+([0-9.]+)", f.read())
    if not match:
        raise RuntimeError("no project(tessera VERSION ...) in CMakeLists.txt")
    return match.group(1)


def cmake_configure_command():
    """Same configure line as the Makefile: Ninja when present, Release, this interpreter."""
    cmd = ["cmake", "-S", ROOT, "-B", CMAKE_BUILD_DIR, "-DCMAKE_BUILD_TYPE=Release",
           f"-DPYTHON_EXECUTABLE={sys.executable}"]
    if shutil.which("ninja"):
        cmd += ["-G", "Ninja"]
    return cmd


class CMakeExtension(Extension):
    """An extension whose sources CMake knows; setuptools only needs its name."""

    def __init__(self, name):
        super().__init__(name, sources=[])


class CMakeBuild(build_ext):
    def run(self):
        if not os.path.exists(os.path.join(CMAKE_BUILD_DIR, "CMakeCache.txt")):
            subprocess.check_call(cmake_configure_command())
        jobs = os.environ.get("TESSERA_BUILD_JOBS", "2")  # the CI machine has 2 cores
        subprocess.check_call(["cmake", "--build", CMAKE_BUILD_DIR, "-j", jobs, "--target", "_C"])
        for ext in self.extensions:
            self.place(ext)

    def place(self, ext):
        """Copy the module CMake wrote into the package dir to where setuptools wants it."""
        built = os.path.join(PACKAGE_DIR, os.path.basename(self.get_ext_filename(ext.name)))
        if not os.path.exists(built):
            raise RuntimeError(f"CMake did not produce {built}")
        target = os.path.abspath(self.get_ext_fullpath(ext.name))
        if os.path.abspath(built) == target:
            return  # editable install: the module is already where it will be imported from
        os.makedirs(os.path.dirname(target), exist_ok=True)
        shutil.copy2(built, target)


setup(
    name="tessera",
    version=project_version(),
    description="Tessera: a tensor compiler for PyTorch",
    python_requires=">=3.9",
    package_dir={"": "torch_backend"},
    packages=find_packages("torch_backend"),
    ext_modules=[CMakeExtension("tessera._C")],
    cmdclass={"build_ext": CMakeBuild},
    # torch.compile(model, backend="tessera") finds the backend without `import tessera`.
    entry_points={"torch_dynamo_backends": ["tessera = tessera.backend:tessera_backend"]},
    # setuptools' own scratch space stays out of CMake's top level, under the same build/.
    options={"build": {"build_base": os.path.join(CMAKE_BUILD_DIR, "setuptools")}},
    zip_safe=False,
)
