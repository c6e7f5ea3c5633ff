/* rtrace gen-wrappers shim: the OpenGL types cudaGL.h uses (only their ABI matters). */
#ifndef RTRACE_SHIM_GL_H
#define RTRACE_SHIM_GL_H
typedef unsigned int GLenum;
typedef unsigned int GLuint;
#endif
