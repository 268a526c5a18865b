# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Check that ansible-doc renders every plugin and role of an installed collection.

Usage: python tests/docs_check.py INSTALLED_COLLECTION_DIR

Fails (exit 1) when ``ansible-doc -l`` misses a module, or when rendering any module,
filter or role exits non-zero or prints a warning or an error.
"""
from __future__ import absolute_import, division, print_function
__metaclass__ = type

import ast
import glob
import os
import subprocess  # nosec B404 - runs ansible-doc with fixed argv lists
import sys

FQCN = 'gpufleet.nodeprep'


def core_internal_warning():
    """The one warning ``ansible-doc -t role`` of ansible-core 2.21 prints about its own internal collection.

    It lists every collection to find the role and warns that ansible-core's ``ansible._protomatter`` (which ships
    without MANIFEST.json) has no version: ansible/ansible#85689, open in 2.21.5. The exact line, with that path
    in this environment's ansible package, says nothing about this collection; any other warning still fails.
    """
    try:
        import ansible
    except ImportError:
        return None
    path = os.path.join(os.path.dirname(ansible.__file__), '_internal', 'ansible_collections', 'ansible', '_protomatter')
    return ("[WARNING]: Collection at '%s' does not have a MANIFEST.json file, nor has it galaxy.yml: "
            "cannot detect version." % path)


def ansible_doc(args):
    bindir = os.path.dirname(sys.executable)
    argv = [os.path.join(bindir, 'ansible-doc')] + args
    env = dict(os.environ, ANSIBLE_NOCOLOR='1', LC_ALL='C.UTF-8')
    proc = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,  # nosec B603
                          universal_newlines=True, check=False)
    return proc.returncode, proc.stdout, proc.stderr


def plugin_names(root, kind):
    names = set()
    for path in glob.glob(os.path.join(root, 'plugins', kind, '*.py')):
        base = os.path.splitext(os.path.basename(path))[0]
        if not base.startswith('_') and base != '__init__':
            names.add(base)
    if kind == 'filter':
        # A filter file may hold several filters; each one is documented by a YAML sidecar.
        names = set(os.path.splitext(os.path.basename(p))[0]
                    for p in glob.glob(os.path.join(root, 'plugins', kind, '*.yml')))
    return sorted(names)


def missing_doc_blocks(path):
    """The names of DOCUMENTATION, EXAMPLES and RETURN that a module file lacks or leaves empty.

    validate-modules only warns about a missing RETURN for a module it does not see as new; we require all three.
    """
    with open(path) as handle:
        tree = ast.parse(handle.read(), path)
    found = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            value = node.value.value if isinstance(node.value, ast.Constant) else None
            found[node.targets[0].id] = value
    return [name for name in ('DOCUMENTATION', 'EXAMPLES', 'RETURN')
            if not isinstance(found.get(name), str) or not found[name].strip()]


def main(root):
    problems = []
    modules = plugin_names(root, 'modules')
    for name in modules:
        missing = missing_doc_blocks(os.path.join(root, 'plugins', 'modules', name + '.py'))
        if missing:
            problems.append('module %s.%s has no (or an empty) %s' % (FQCN, name, ', '.join(missing)))
    rc, out, err = ansible_doc(['-l', FQCN])
    if rc != 0:
        problems.append('ansible-doc -l %s failed (rc=%d): %s' % (FQCN, rc, err.strip()))
    listed = set(line.split()[0] for line in out.splitlines() if line.strip())
    for name in modules:
        if '%s.%s' % (FQCN, name) not in listed:
            problems.append('ansible-doc -l does not list module %s.%s' % (FQCN, name))

    checks = [('module', name) for name in modules]
    checks += [(kind, name) for kind in ('filter', 'lookup', 'callback', 'inventory', 'test')
               for name in plugin_names(root, kind)]
    checks += [('role', os.path.basename(os.path.dirname(os.path.dirname(p))))
               for p in sorted(glob.glob(os.path.join(root, 'roles', '*', 'meta', 'argument_specs.yml')))]
    for kind, name in checks:
        rc, out, err = ansible_doc(['-t', kind, '%s.%s' % (FQCN, name)])
        known = core_internal_warning() if kind == 'role' else None
        bad = [line for line in err.splitlines() if ('WARNING' in line or 'ERROR' in line) and line.strip() != known]
        if rc != 0 or bad or not out.strip():
            problems.append('ansible-doc -t %s %s.%s: rc=%d %s' % (kind, FQCN, name, rc, ' | '.join(bad or [err.strip()])))
        else:
            print('ok  %-7s %s.%s' % (kind, FQCN, name))

    if not checks:
        problems.append('nothing to render: no modules, filters or roles found under %s' % root)
    for problem in problems:
        print('FAIL ' + problem)
    return 1 if problems else 0


if __name__ == '__main__':
    if len(sys.argv) != 2:
        sys.exit('usage: docs_check.py INSTALLED_COLLECTION_DIR')
    sys.exit(main(sys.argv[1]))
