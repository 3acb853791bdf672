"""Package layout: top-level folders mapped into the undobench_gym namespace.

setuptools' declarative config cannot discover sub-packages under several mapped roots
(every domain is a sub-package of envs/), so this file lists them by walking the folders.
Everything else lives in pyproject.toml.
"""

from setuptools import find_packages, setup

ROOTS = {
    "undobench_gym": "undobench_gym",
    "undobench_gym.envs": "envs",
    "undobench_gym.proxies": "proxies",
    "undobench_gym.agents": "agents",
    "undobench_gym.evaluation": "evaluation",
    "undobench_gym.images": "images",
}

packages = []
for package, folder in ROOTS.items():
    packages.append(package)
    packages += [f"{package}.{sub}" for sub in find_packages(folder)]

setup(
    packages=packages,
    package_dir=ROOTS,
    package_data={
        "undobench_gym": ["py.typed"],
        "undobench_gym.images": ["Dockerfile*"],
        # report.html's Jinja2 template and the CSS/JS it inlines
        "undobench_gym.evaluation.html": ["templates/*.j2", "static/*.css", "static/*.js"],
    },
)
